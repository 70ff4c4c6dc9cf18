"""Lab 14's traffic counter, against Triton 3.8's interpreter: pinned internals, hand-counted kernels, edges,
refusals, and the closed forms against the counts on shapes Hypothesis draws.

The counter wraps only ``InterpreterBuilder.create_masked_load`` and ``create_masked_store``; every way a kernel
moves data in Triton 3.8 must end there (or be refused), and these tests fail loudly when a Triton upgrade
changes that.
"""
from __future__ import annotations

import inspect
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton decorates the kernels below

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from lab14_solution import kernel, namespace  # noqa: E402

from util.labs.lab14 import judge, launch  # noqa: E402
from util.labs.lab14.traffic import TRITON_VERSION, OutOfBounds, counting  # noqa: E402


def test_the_interpreter_internals_the_counter_wraps_are_those_of_triton_3_8():
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    assert triton.__version__ == TRITON_VERSION == "3.8.0"
    # an unmasked load or store builds an all-true mask and goes through the masked methods (counted once)
    assert "self.create_masked_load(" in inspect.getsource(builder.create_load)
    assert "self.create_masked_store(" in inspect.getsource(builder.create_store)
    # tensor descriptors and their gather/scatter too
    assert "self.create_masked_load(" in inspect.getsource(builder.create_descriptor_load)
    assert "self.create_masked_store(" in inspect.getsource(builder.create_descriptor_store)
    assert "self.create_descriptor_load(" in inspect.getsource(builder.create_descriptor_gather)
    assert "self.create_descriptor_store(" in inspect.getsource(builder.create_descriptor_scatter)
    # the masked methods do the access themselves, with the arguments the wrappers pass on
    assert list(inspect.signature(builder.create_masked_load).parameters) == [
        "self", "ptrs", "mask", "other", "cache_modifier", "eviction_policy", "is_volatile"]
    assert list(inspect.signature(builder.create_masked_store).parameters) == [
        "self", "ptrs", "value", "mask", "cache_modifier", "eviction_policy"]
    # (Triton's own methods: the course's counter, once installed in this process, wraps them; functools.wraps
    # keeps the original as __wrapped__)
    assert "_interpreter.load(" in inspect.getsource(inspect.unwrap(builder.create_masked_load))
    assert "_interpreter.store(" in inspect.getsource(inspect.unwrap(builder.create_masked_store))
    # the grid executor sets the program index the counter reports
    assert "interpreter_builder.set_grid_idx(" in inspect.getsource(interpreter.GridExecutor.__call__)


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if MASKED:
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
    else:
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _block_pointer(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    dst = tl.make_block_ptr(y_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    tl.store(dst, tl.load(src, boundary_check=(0,)), boundary_check=(0,))


@triton.jit
def _atomic(x_ptr, BLOCK: tl.constexpr):
    tl.atomic_add(x_ptr + tl.arange(0, BLOCK), 1.0)


def _run(fn, grid, *args, tensors):
    with counting(tensors) as traffic:
        fn[grid](*args)
    return traffic


def test_masked_lanes_move_nothing_and_an_unmasked_load_counts_once():
    x, y = torch.arange(16.0), torch.zeros(16)
    traffic = _run(_copy, (1,), x, y, 10, 16, True, tensors={"x": x, "y": y})
    assert (traffic.loaded, traffic.stored, traffic.loads, traffic.stores) == ({"x": 40, "y": 0}, {"x": 0, "y": 40}, 1, 1)
    assert torch.equal(y, torch.tensor([*range(10)] + [0] * 6, dtype=torch.float32))
    traffic = _run(_copy, (1,), x, y, 16, 16, False, tensors={"x": x, "y": y})
    assert (traffic.loaded, traffic.stored) == ({"x": 64, "y": 0}, {"x": 0, "y": 64})


def test_block_pointers_are_counted_like_masked_loads():
    x, y = torch.arange(10.0), torch.zeros(10)
    traffic = _run(_block_pointer, (1,), x, y, 10, 16, tensors={"x": x, "y": y})
    assert (traffic.loaded_bytes, traffic.stored_bytes, traffic.total_bytes) == (40, 40, 80)
    assert torch.equal(x, y)


def test_a_lane_outside_every_tensor_stops_the_kernel_before_it_moves_anything():
    x, y = torch.arange(16.0), torch.zeros(10)  # y is 10 long: 6 unmasked lanes of the store fall past it
    with pytest.raises(Exception) as raised:
        _run(_copy, (1,), x, y, 16, 16, False, tensors={"x": x, "y": y})
    assert isinstance(raised.value.__cause__, OutOfBounds)  # inside Triton's InterpreterError
    assert "program (0, 0, 0) tried to store 6 element(s) outside every tensor the kernel was given (x, y)" in \
        str(raised.value.__cause__)
    assert torch.equal(y, torch.zeros(10))  # refused before the store: nothing written


def test_atomics_are_refused_since_they_would_not_be_counted():
    x = torch.zeros(16)
    with pytest.raises(Exception) as raised:
        _run(_atomic, (1,), x, 16, tensors={"x": x})
    assert "atomics are not counted" in str(raised.value.__cause__)
    assert torch.equal(x, torch.zeros(16))


def test_another_triton_is_refused_by_name(monkeypatch):
    from util.labs.lab14 import traffic

    monkeypatch.setattr(traffic, "_installed", [])
    monkeypatch.setattr(triton, "__version__", "3.9.0")
    with pytest.raises(RuntimeError, match="counts memory traffic inside Triton 3.8.0's interpreter; this is Triton 3.9.0"):
        traffic.install()


@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 70),
       block=st.sampled_from([(16, 16, 16), (32, 16, 16), (16, 32, 32)]), transposed=st.booleans())
def test_the_solution_matmul_moves_exactly_the_closed_forms_bytes(m, n, k, block, transposed):
    generator = torch.Generator().manual_seed(m * 10_000 + n * 100 + k)
    a, b = torch.randn(m, k, generator=generator), torch.randn(k, n, generator=generator)
    c, traffic = launch.run_matmul(kernel("matmul"), a, b.T.contiguous().T if transposed else b, block)
    assert torch.allclose(c.double(), a.double() @ b.double(), rtol=0, atol=1e-4)
    assert (traffic.loaded, traffic.stored) == judge.matmul_traffic(m, n, k, block)


@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 80), heads=st.integers(1, 2), block=st.sampled_from([(16, 16), (32, 16), (32, 32)]),
       causal=st.booleans())
def test_the_solution_flash_forward_moves_exactly_the_closed_forms_bytes(n, heads, block, causal):
    generator = torch.Generator().manual_seed(n * 10 + heads)
    q, k, v = (torch.randn(heads, n, 16, generator=generator) for _ in range(3))
    o, lse, traffic = launch.run_flash(kernel("flash"), q, k, v, causal, block)
    expected = judge.attention64(q, k, v, torch.zeros_like(q), causal)[0]
    assert torch.allclose(o.double(), expected, atol=1e-5)
    assert (traffic.loaded, traffic.stored) == judge.flash_traffic(heads, n, 16, block, causal)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 3000), d=st.sampled_from([16, 32, 64, 128]), heads=st.integers(1, 16),
       block=st.sampled_from([16, 32, 64, 128, 256]), causal=st.booleans())
def test_the_grader_closed_form_is_task_14_1s_flash_bytes_when_the_blocks_are_equal(n, d, heads, block, causal):
    loaded, stored = judge.flash_traffic(heads, n, d, (block, block), causal)
    costs = namespace()["attention_costs"](n, d, heads, block, causal)
    assert sum(loaded.values()) + sum(stored.values()) == costs["flash_bytes"]
    assert costs["flash_flops"] <= costs["naive_flops"] and (causal or costs["flash_flops"] == costs["naive_flops"])
