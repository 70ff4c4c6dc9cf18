"""The result block ``submit`` prints: lists of integers read as lists, shapes as shapes (util/display.py)."""
from __future__ import annotations

import ast

from hypothesis import given
from hypothesis import strategies as st

from util.display import fmt, render_block, render_lines


@given(st.lists(st.integers(min_value=-10**15, max_value=10**15), min_size=1, max_size=12),
       st.sampled_from(["bytes_sent", "rank0_total", "tokens", "sizes", "", "counts"]))
def test_a_list_of_integers_reads_as_that_list(values, key):
    """Under any key that names no shape, the text is the list itself (it parses back to the same integers)."""
    shown = fmt(values, key)
    assert ast.literal_eval(shown) == values
    assert "x" not in shown


@given(st.lists(st.integers(min_value=1, max_value=4096), min_size=1, max_size=6),
       st.sampled_from(["shape", "output_shape", "input_shapes", "dims", "kernel_dims"]))
def test_a_shape_reads_as_a_shape(values, key):
    assert fmt(values, key) == "x".join(map(str, values))


def test_the_block_shows_lists_and_shapes_apart():
    text = render_block("13.4", "Sharded state", {"rank0_total": [24921779200, 14018500800], "shape": [1, 3, 224, 224],
                                                  "params": 6624904, "empty": []})
    assert "[24921779200, 14018500800]" in text and "24921779200x" not in text
    assert "1x3x224x224" in text and "6,624,904" in text and "[]" in text


def test_a_table_formats_each_column_by_its_header():
    lines = render_lines([{"name": "conv1", "output_shape": [1, 64, 112, 112], "splits": [334, 333, 333]}])
    assert any("1x64x112x112" in line and "[334, 333, 333]" in line for line in lines)
