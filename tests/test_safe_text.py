"""grader.core.safe_text: student text made safe for the terminal, CSV, Markdown, HTML and JSON.

Examples first (the attacks of the hostile-data tests), then properties over arbitrary text (Hypothesis),
surrogates and control characters included.
"""
from __future__ import annotations

import csv
import io
import json
import re
import unicodedata

import mistune
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.core import safe_text
from grader.core.safe_text import (
    LIMIT_MESSAGE,
    LIMIT_NAME,
    csv_cell,
    file_name,
    html,
    markdown,
    plain,
    shorten,
    terminal,
)

ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=300)  # surrogates and controls too
NASTY = st.text(st.sampled_from(list("\x1b[]();=+-@\t\r\n\x07\x9b\x9d\\|*_`<>&#!.:/w@\u202e\u2028\ud800\udcff a1")),
                max_size=120)
TEXTS = st.one_of(ANY_TEXT, NASTY)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

ATTACK = ("\x1b[2J\x1b[H"                                   # clear the screen
          "\x1b]52;c;cm0gLXJmIH4=\x07"                      # OSC 52: set the clipboard
          "\x1b[32mALL PASSED\x1b[0m")                      # green


def _is_clean(text: str) -> bool:
    text.encode("utf-8")  # raises on a lone surrogate
    return not any((unicodedata.category(c) == "Cc" and c not in "\n\t") or c in BIDI for c in text)


def test_terminal_attacks_are_removed_whole():
    assert plain(ATTACK) == "ALL PASSED"
    assert terminal("cell 3 raised\nValueError: " + ATTACK) == "cell 3 raised\\nValueError: ALL PASSED"
    assert plain("a\x9b31mb\x9d0;title\x9cc\x1bcd") == "abcd"  # 8-bit CSI and OSC, and ESC c (reset)


def test_a_4_mib_message_is_cut_to_the_limit_and_says_how_much():
    name = "E" * (4 << 20)
    out = plain(name)
    assert len(out) == LIMIT_MESSAGE
    assert out.endswith(f" [... {(4 << 20) - LIMIT_MESSAGE + len(' [... 4,192,332 characters cut]'):,} characters cut]")
    assert len(terminal(name, 100)) == 100 and len(file_name(name)) == LIMIT_NAME


def test_shorten_keeps_the_head_and_counts_the_cut():
    assert shorten("abc", 10) == "abc"
    assert shorten("0123456789" * 10, 40) == "0123456789012345 [... 84 characters cut]"
    assert shorten("0123456789", 5) == "01234"  # too short for the mark: a plain cut


@pytest.mark.parametrize("text, expected", [
    ('=HYPERLINK("http://evil","grade")', '\'=HYPERLINK("http://evil","grade")'),
    ("+1", "+1"), ("-0.5", "-0.5"), ("-1e5", "-1e5"), ("-2+3", "'-2+3"), ("+1)", "'+1)"), ("-", "'-"), ("@SUM(A1)", "'@SUM(A1)"), ("\t=1", "'\t=1"), ("\r=1", "'\n=1"),
    ("\uff1d1+1", "'\uff1d1+1"), ("alice", "alice"), ("5/10", "5/10"), (None, ""), (True, "True"),
])
def test_csv_cells_never_start_a_formula(text, expected):
    assert csv_cell(text) == expected


def test_csv_numbers_stay_numbers():
    assert csv_cell(-5) == -5 and csv_cell(2.5) == 2.5 and csv_cell(10**30) == 10**30


def test_markdown_shows_script_and_links_as_text():
    out = markdown("<script>alert(1)</script> [your grade](https://evil.example/login) | ![x](y.png) **bold**")
    rendered = _render(out)
    assert "<script" not in rendered and "<a " not in rendered and "<img" not in rendered
    assert "<strong" not in rendered and "&lt;script&gt;" in rendered
    assert "https:" in rendered and "evil.example/login" in rendered  # the text is still there to read


@pytest.mark.parametrize("text", ["# heading", "- item", "+ item", "1. item", "3) item", "> quote", "---", "==="])
def test_markdown_escapes_what_starts_a_block(text):
    assert "<p>" in _render(markdown(text)) and "<h" not in _render(markdown(text))


def test_html_escapes_everything_that_opens_a_tag_or_attribute():
    assert html('<img src=x onerror="alert(1)">') == "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"


def test_file_names_show_bytes_that_are_not_utf8():
    assert file_name(b"lab1_\xff.ipynb") == "lab1_\\xff.ipynb"
    assert file_name("lab1_\udcff.ipynb") == "lab1_\\xff.ipynb"  # how Python names that file: os.fsdecode
    assert file_name("student\x1b[2J\nlab1.ipynb") == "student\\nlab1.ipynb"
    assert file_name("alice/lab1.ipynb") == "alice/lab1.ipynb"


_MD = mistune.create_markdown(escape=False, plugins=["table", "url", "strikethrough"])
"""A renderer that lets raw HTML through (as GitHub-flavoured renderers do), so escaping is ours."""


def _render(text: str) -> str:
    return _MD(text)


@SETTINGS
@given(TEXTS, st.integers(0, 400))
def test_plain_is_valid_utf8_without_controls_and_bounded(text, limit):
    out = plain(text, limit)
    assert _is_clean(out) and len(out) <= limit
    assert json.loads(json.dumps(out, ensure_ascii=False)) == out


@SETTINGS
@given(st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "Zs"]), max_size=200))
def test_plain_leaves_ordinary_text_alone(text):
    assert plain(text) == text and terminal(text) == text


@SETTINGS
@given(TEXTS)
def test_terminal_is_one_clean_line(text):
    out = terminal(text, 500)
    assert _is_clean(out) and "\n" not in out and "\x1b" not in out and len(out) <= 500


@SETTINGS
@given(st.one_of(TEXTS, st.integers(), st.floats(allow_nan=False), st.none(), st.booleans()))
def test_csv_cells_read_back_without_a_formula(value):
    cell = csv_cell(value)
    buffer = io.StringIO()
    csv.writer(buffer).writerow(["name", cell])
    read = next(csv.reader(io.StringIO(buffer.getvalue())))
    assert len(read) == 2
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        assert cell == value
    else:
        assert not read[1].startswith(("=", "+", "-", "@", "\t", "\r", "\n")) or re.fullmatch(r"[+-][\d.eE+-]+", read[1])
        assert len(read[1]) <= LIMIT_MESSAGE
        assert _is_clean(read[1])


@SETTINGS
@given(TEXTS)
def test_markdown_stays_text_in_one_table_cell(text):
    out = markdown(text, 300)
    assert _is_clean(out) and "\n" not in out
    rendered = _render(f"| check | message |\n|---|---|\n| a | {out} |\n")
    assert rendered.count("<td") == 2, rendered
    assert not re.search(r"<(?!/?(table|thead|tbody|tr|th|td)\b)", rendered), rendered  # no tag of the student's
    paragraph = _render(out)
    assert not re.search(r"<(?!/?p>)", paragraph), paragraph


@SETTINGS
@given(TEXTS)
def test_html_has_no_tag_or_quote(text):
    out = html(text, 300)
    assert _is_clean(out) and not set(out) & set("<>\"'")


@SETTINGS
@given(st.binary(max_size=300))
def test_any_file_name_gets_a_clean_bounded_name(name):
    out = file_name(name)
    assert _is_clean(out) and "\n" not in out and len(out) <= LIMIT_NAME
    if name.isascii() and name.decode().isprintable():
        assert out == name.decode()[:LIMIT_NAME] or len(name) > LIMIT_NAME


@SETTINGS
@given(TEXTS, st.integers(40, 400))
def test_shorten_keeps_a_prefix_within_the_limit(text, limit):
    out = shorten(text, limit)
    assert len(out) <= limit
    head = out.split(" [... ")[0] if len(text) > limit else out
    assert text.startswith(head)


def test_every_function_accepts_any_value():
    class Hostile:
        def __str__(self):
            raise RuntimeError("no")

    for function in (plain, terminal, markdown, html, file_name, csv_cell):
        assert isinstance(function(Hostile()), str)
        assert isinstance(function(b"\xff\xfe"), str)
    assert safe_text.plain(12) == "12"
