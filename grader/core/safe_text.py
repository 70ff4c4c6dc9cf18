"""Text from a submission, made safe for where the grader writes it.

Everything a student controls (file names, exception messages, printed output, answer values)
can reach an instructor's terminal, a spreadsheet, a Markdown or HTML page that Gradescope
renders, or a JSON file. Each destination has its own attack: terminal escapes that clear the
screen or set the clipboard (OSC 52), formulas in a CSV cell (``=HYPERLINK(...)``), links and
``<script>`` in Markdown, lone surrogates that make a UTF-8 writer raise, a 4 MiB exception name
copied into every result file. One function per destination::

    plain(text)      valid UTF-8, no control characters, at most LIMIT_MESSAGE characters
    terminal(text)   plain, on one line (newlines shown as \\n): safe to print
    csv_cell(value)  numbers untouched; text plain, and no formula (a leading = + - @ gets a ')
    markdown(text)   plain, with Markdown and HTML characters escaped: no links, no HTML, no table breaks
    html(text)       plain, HTML-escaped
    file_name(name)  a readable name for any file name, bytes that are not UTF-8 shown as \\xff
    json_value(v)    a JSON value whose strings are all valid UTF-8 (for answers kept for disputes)

Every function accepts any value (``str()`` is applied to what is not text) and never raises.
Long texts keep their head and say how much was cut: ``shorten(text, limit)``.
"""
from __future__ import annotations

import html as _html
import os
import re
from typing import Any

LIMIT_NAME = 200
"""Characters of a file or submission name that are shown."""
LIMIT_MESSAGE = 2000
"""Characters of a message (an exception, a feedback line, a CSV cell) that are kept."""

_CUT = " [... {} characters cut]"
_SCAN = 16
"""Text longer than ``_SCAN * limit`` characters is cut before it is cleaned (bounded work)."""

_ESCAPE_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"                                   # CSI: colours, clear screen, cursor
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC (clipboard, title), DCS...
    r"|\x1b[ -/]*[0-~]")                                                  # any other ESC sequence
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Bidirectional marks and overrides: they make a terminal or a page show text in another order."""
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + "]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NEWLINES = re.compile("\r\n?|[\u2028\u2029\x85]")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="backslashreplace")
    try:
        return str(value)
    except Exception as exc:  # a hostile __str__
        return f"<unprintable {type(value).__name__}: {type(exc).__name__}>"


def _cut(text: str, limit: int, extra: int = 0) -> str:
    """``text`` within ``limit`` characters, marked when something (plus ``extra`` dropped before) is cut."""
    if len(text) <= limit and not extra:
        return text
    limit = max(limit, 0)
    total = len(text) + extra
    keep = limit
    while keep > 0 and keep + len(_CUT.format(f"{total - keep:,}")) > limit:
        keep -= 1
    marker = _CUT.format(f"{total - keep:,}")
    return text[:keep] + marker if keep > 0 else text[:limit]


def shorten(text: str, limit: int) -> str:
    """``text`` itself when it has at most ``limit`` characters; else its head, ending with
    ``" [... N characters cut]"``, the whole at most ``limit`` characters long."""
    return _cut(_text(text), limit)


def _surrogate(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"  # as os.fsdecode made it


def _clean(text: Any, limit: int) -> tuple[str, int]:
    """The cleaned text (not yet cut) and how many characters were dropped unread from its end."""
    text = _text(text)
    extra = 0
    if len(text) > _SCAN * max(limit, 0) + 1024:  # a 4 MiB message: clean only what can be kept
        extra = len(text) - (_SCAN * max(limit, 0) + 1024)
        text = text[: _SCAN * max(limit, 0) + 1024]
    text = _NEWLINES.sub("\n", text)
    text = _ESCAPE_SEQUENCES.sub("", text)
    text = _CONTROL.sub("", text)
    return _SURROGATE.sub(_surrogate, text), extra


def plain(text: Any, limit: int = LIMIT_MESSAGE) -> str:
    """``text`` as valid UTF-8 without control characters, at most ``limit`` characters.

    Terminal escape sequences are removed whole (``"\\x1b[2J"`` leaves nothing, not ``"[2J"``);
    other control characters (C0 but newline and tab, DEL, C1) and bidirectional overrides are
    removed; line breaks become ``\\n``; lone surrogates become ``\\xff`` / ``\\udXXX`` escapes.
    """
    clean, extra = _clean(text, limit)
    return _cut(clean, limit, extra)


def terminal(text: Any, limit: int = LIMIT_MESSAGE) -> str:
    """``plain(text)`` on one line, safe to print: each newline is shown as the two characters ``\\n``."""
    clean, extra = _clean(text, limit)
    return _cut(clean.replace("\n", "\\n"), limit, extra)


_FORMULA = tuple("=+-@\t\r\n") + ("\uff1d", "\uff0b", "\uff0d", "\uff20")  # and their full-width forms
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: Any, limit: int = LIMIT_MESSAGE) -> str | int | float:
    """A value for one CSV cell that no spreadsheet runs as a formula.

    Numbers (not booleans) are returned as they are, and so is text that is one plain number
    (``"+5"``, ``"-0.5"``). Other text is ``plain``; when it starts with ``= + - @``, a tab or a
    line break, it gets a leading ``'`` (spreadsheets then show it as text). ``None`` is the empty
    cell. At most ``limit`` characters (:data:`LIMIT_MESSAGE` unless given: a written answer is longer).
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if value is None:
        return ""
    text = plain(value, limit)
    if text.startswith(_FORMULA) and not _NUMBER.fullmatch(text):
        return "'" + plain(value, limit - 1)
    return text


_MARKDOWN_ANYWHERE = re.compile(r"([\\`*\[\]|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
"""Escapes, code spans, emphasis, links and images, table cells, strikethrough (an underscore inside a
word, as in ``count_macs``, makes no emphasis and is left as it is)."""
_MARKDOWN_START = re.compile(r"^(?:([#+\-=>])|(\d{1,9})([.)]))")
"""What makes a heading, a list, a rule or a quote at the start of a line."""
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)(?=[\w-]+\.\w)", re.IGNORECASE)


def markdown(text: Any, limit: int = LIMIT_MESSAGE) -> str:
    """``plain(text)`` for a Markdown line or table cell, shown as written and never interpreted.

    Line breaks become spaces; ``& < >`` become HTML entities (no HTML, no ``<https://...>``
    link); the characters that make code, emphasis, links, images, table cells or strikethrough
    are backslash-escaped, and so is a leading heading, list or quote marker; a zero-width space
    after ``://``, ``www`` and the ``@`` of an e-mail address stops renderers from turning bare
    addresses into links (``resnet18@1x3x224x224`` is left alone). The limit counts the text before
    escaping.
    """
    text = " ".join(plain(text, limit).split())
    text = _AUTOLINK.sub("\u200b", text)
    text = _html.escape(text, quote=False)
    text = _MARKDOWN_ANYWHERE.sub(r"\\\1", text)
    return _MARKDOWN_START.sub(lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3), text)


def html(text: Any, limit: int = LIMIT_MESSAGE) -> str:
    """``plain(text)`` with ``& < > " '`` escaped, for HTML text or a quoted attribute."""
    return _html.escape(plain(text, limit), quote=True)


def file_name(name: Any, limit: int = LIMIT_NAME) -> str:
    """A readable, safe display name for any file name: a path, a ``str`` or raw ``bytes``.

    Bytes that are not UTF-8 are shown as ``\\xff`` escapes (as Python writes them), control
    characters are dropped, newlines shown as ``\\n``, at most ``limit`` characters.
    """
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    if isinstance(name, str):
        try:
            name = os.fsencode(name)
        except UnicodeError:  # a lone surrogate that no file system produced
            pass
    return terminal(name, limit)


def json_value(value: Any, depth: int = 64) -> Any:
    """A copy of the JSON value ``value`` that any strict UTF-8 JSON reader accepts: lone surrogates
    in strings and keys become ``\\udXXX`` text (nothing else changes); deeper than ``depth``
    levels, a value is replaced by a note saying so."""
    if isinstance(value, str):
        return _SURROGATE.sub(_surrogate, value)
    if depth <= 0 and isinstance(value, (dict, list)):
        return "<nested too deep to keep>"
    if isinstance(value, dict):
        return {json_value(str(key)): json_value(item, depth - 1) for key, item in value.items()}
    if isinstance(value, list):
        return [json_value(item, depth - 1) for item in value]
    return value
