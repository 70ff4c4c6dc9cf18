"""Lab 15's given pieces of a byte-level BPE tokenizer: the pre-tokeniser, the course's text and small helpers.

A byte-level BPE tokenizer (GPT-2's kind) starts from the 256 byte values as its first 256 tokens, so any
text can be encoded (a character it never saw falls back to its UTF-8 bytes), and learns **merges**:
pairs of adjacent tokens replaced by one new token. Training and encoding are the lab's task 15.1; what
is given here is what every correct answer must share, stated once:

* :func:`pretokenize` cuts a text into **pre-tokens** with :data:`PATTERN` (GPT-2's pattern, written for
  Python's ``re``): merges never cross a pre-token's edge, so ``" the"`` and ``"the"`` are different words
  and no token spans two words;
* :func:`course_text` is the text the notebook trains on: the Markdown of the course's own handouts of
  labs 1-7, frozen in this folder (``course_text.txt``, 106 KB of UTF-8), so that the merges never depend
  on the Python version or a download;
* :func:`synthetic_text` draws a text of words from a seed (a corpus full of tied pair counts);
* :func:`show` prints a token's bytes readably.
"""
from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent

PATTERN = r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"
"""The pre-tokeniser's regular expression, tried left to right at each position: an English contraction
(``'s``, ``'t``, ``'re``, ``'ve``, ``'m``, ``'ll``, ``'d``); letters with at most one space before them; digits
likewise; other symbols (punctuation, ``_``) likewise; a run of whitespace that leaves its last space to the
word after it; any other run of whitespace. Every character of a text falls in exactly one pre-token."""
_PRE = re.compile(PATTERN)


def pretokenize(text: str) -> list[str]:
    """The pre-tokens of ``text`` (:data:`PATTERN`), in order; ``"".join(pretokenize(text)) == text``.

    >>> pretokenize("Hello world, it's 2024!")
    ['Hello', ' world', ',', ' it', "'s", ' 2024', '!']
    """
    return _PRE.findall(text)


@lru_cache(maxsize=1)
def course_text() -> str:
    """The text the notebook trains its tokenizer on: the Markdown cells of the course's handouts of labs
    1-7, joined by blank lines (106,398 bytes of UTF-8, 106,317 characters)."""
    return (HERE / "course_text.txt").read_text(encoding="utf-8")


def synthetic_text(seed: int, words: int, alphabet: str = "abcde", longest: int = 5) -> str:
    """A text of ``words`` words of 1 to ``longest`` letters from ``alphabet``, each drawn uniformly from
    ``random.Random(seed)``, separated by single spaces. A small alphabet makes many pairs equally
    frequent: the tie-break rule decides most merges."""
    generator = random.Random(seed)
    return " ".join("".join(generator.choice(alphabet) for _ in range(generator.randint(1, longest)))
                    for _ in range(words))


def show(token: bytes) -> str:
    """A token's bytes as text where they are valid UTF-8 (spaces shown as ``·``), else as ``<hex>``."""
    try:
        return token.decode("utf-8").replace(" ", "·").replace("\n", "\\n")
    except UnicodeDecodeError:
        return "<" + token.hex(" ") + ">"
