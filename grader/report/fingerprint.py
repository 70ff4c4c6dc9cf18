"""A submission's code as copydetect fingerprints it, and the handout's code that never counts as shared.

:class:`Handout` is one lab's own code (its generated notebook's code cells and support files, the course
modules it imports): copydetect's boilerplate, and its lines. :func:`fingerprint` is copydetect's fingerprint of
one part of a submission (its code cells, its C++ files, its written answers: :mod:`grader.report.similarity`),
with the handout's characters marked (:class:`Print`) so that they are counted and shown on neither side.
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grader.core import notebook, safe_text
from util.contract import Lab

NOISE = 50
"""copydetect's noise threshold: the k of its k-grams, in characters of filtered code (``V=V.V(V,V)`` is 10;
50 is four to six statements). Measured on the parallelism lab (``tests/test_similarity.py``): at copydetect's
default of 25, two notebooks written from the handout alone shared 33% and 19% of their code with the solution
(the handout's formulas leave few ways to write a line); at 50, 19% and 9%, while disguised copies of the solution (names,
order, comments and spacing changed) kept 99-100% and one with a line inserted every third line 84%."""
WINDOW = 1
"""Winnowing window: 1 keeps every k-gram (copydetect's default guarantee = noise). A wider window keeps
fewer, chosen by Python's ``hash(str)``, which differs between runs; a window of 1 gives the same scores
every run."""
CODE_SUFFIXES = {".py": "python", ".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp", ".c": "cpp", ".h": "cpp",
                 ".hpp": "cpp", ".cu": "cpp"}
"""Support files compared, by suffix, and the language their tokens are read in."""
MAX_CODE = 1 << 20
"""Characters of one submission's code compared (per language); the rest is not read."""


def normal_text(text: str) -> str:
    """A written answer as compared: lower case, its words (letters and digits) separated by one space."""
    return " ".join(re.findall(r"[^\W_]+", safe_text.plain(text, MAX_CODE).casefold()))


def code_cells(path: Path) -> list[str]:
    """The code cells of the notebook at ``path``, cleaned (:func:`grader.core.safe_text.plain`)."""
    nb = notebook.read(path)
    return [safe_text.plain(c.get("source", ""), MAX_CODE) for c in nb.get("cells", ())
            if c.get("cell_type") == "code"]


def support_code(folder: Path, lab: Lab) -> dict[str, list[str]]:
    """``lang -> texts`` of the code files of ``lab``'s support folders under ``folder``."""
    found: dict[str, list[str]] = {}
    for entry in lab.support:
        root = folder / entry
        paths = [root] if root.is_file() else sorted(root.rglob("*")) if root.is_dir() else []
        for path in paths:
            lang = CODE_SUFFIXES.get(path.suffix.lower())
            if lang and path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_CODE:
                found.setdefault(lang, []).append(safe_text.plain(path.read_text(encoding="utf-8", errors="replace"),
                                                                  MAX_CODE))
    return found


@dataclass(frozen=True)
class Handout:
    """The handout's own code of one lab: what never counts as shared."""

    cells: frozenset[str]
    """Its code cells, whitespace-trimmed: a submission's cell equal to one is dropped."""
    boilerplate: dict[str, np.ndarray]
    """Part -> copydetect's boilerplate hashes."""
    lines: frozenset[str] = frozenset()
    """Every line of its code, without its whitespace: a line of a submission equal to one (a signature, a
    docstring, a comment of the handout's, however short, however spaced) is the handout's, never counted or
    shown as shared."""

    @classmethod
    def of(cls, lab: Lab, repo: Path) -> "Handout":
        from util.labs import grader_only, imported_sources

        path = repo / "labs" / lab.notebook
        cells = code_cells(path) if path.is_file() else []
        texts: dict[str, list[str]] = {"python": list(cells)}
        for lang, found in support_code(path.parent, lab).items():
            texts.setdefault(lang, []).extend(found)
        for module in imported_sources(lab):  # the course's helpers a student may paste
            if not grader_only(module):
                texts["python"].append(module.read_text(encoding="utf-8"))
        if path.is_file():  # the answer cells' templates and the questions: never an answer's own words
            nb = notebook.read(path)
            texts["text"] = [normal_text(c.get("source", "")) for c in nb.get("cells", ())
                             if c.get("cell_type") == "markdown"]
        boilerplate = {lang: np.unique(np.array(sorted(h for t in found for h in fingerprint(t, lang).hashes),
                                                dtype=np.int64)) for lang, found in texts.items()}
        lines = frozenset("".join(line.split()) for lang, found in texts.items() if lang != "text" for t in found
                          for line in t.splitlines() if line.strip())
        return cls(frozenset(c.strip() for c in cells), boilerplate, lines)


@dataclass(frozen=True)
class Print:
    """copydetect's fingerprint of one part of a submission, and which of its characters are the handout's."""

    fp: Any
    """The :class:`copydetect.CodeFingerprint`."""
    raw: np.ndarray
    """Per character of the filtered code (and one past the end), its offset in the text, as copydetect maps
    passages back to the text."""
    own: np.ndarray
    """Per character of the filtered code: ``False`` where a k-gram of the handout's covers it."""
    coverage: int
    """Characters of filtered code that are the submission's own and that its fingerprints cover."""

    @property
    def hashes(self) -> set:
        return self.fp.hashes

    def own_passages(self, slices: np.ndarray) -> tuple[int, np.ndarray]:
        """copydetect's passages ``slices`` (in the text) less the handout's characters: how many characters of
        filtered code they hold, and the passages left, in the text."""
        inside = np.zeros(len(self.own), dtype=bool)
        for start, end in zip(*(np.searchsorted(self.raw, np.asarray(x, dtype=np.int64)) for x in slices)):
            inside[start:end] = True
        keep = inside & self.own
        edges = np.diff(np.concatenate([[0], keep.astype(np.int8), [0]]))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        return int(keep.sum()), np.array([self.raw[starts], self.raw[ends]], dtype=np.int64)


def covered(positions: np.ndarray, length: int) -> np.ndarray:
    """The characters of ``length`` that a k-gram starting at one of ``positions`` covers."""
    mask = np.zeros(length, dtype=bool)
    if len(positions):
        spans = (np.asarray(positions, dtype=np.int64)[:, None] + np.arange(NOISE)).ravel()
        mask[spans[spans < length]] = True
    return mask


def given_lines(text: str, lines: frozenset[str]) -> np.ndarray:
    """Per character of ``text``: whether it lies on a line equal (whitespace left out) to one of ``lines``."""
    mask, at = np.zeros(len(text) + 1, dtype=bool), 0
    for line in text.splitlines(keepends=True):
        bare = "".join(line.split())
        if bare and bare in lines:
            mask[at:at + len(line)] = True
        at += len(line)
    return mask


NAMES = {"python": "code.py", "cpp": "code.cpp", "text": "answers.txt"}
"""The file name copydetect is told for a part: Pygments picks its lexer by it."""


def tokens(text: str, lang: str) -> tuple[str, np.ndarray]:
    """copydetect's ``filter_code`` of ``text``: its filtered code and offsets (written answers: as they are).
    The costly step (Pygments' lexer), and a pure one: any process, on any machine, gives the same."""
    from copydetect.utils import filter_code

    return (text, np.array([])) if lang == "text" else filter_code(text, NAMES[lang])


def fingerprint(text: str, lang: str, boilerplate: np.ndarray | None = None, starts: tuple[int, ...] = (),
                 lines: frozenset[str] = frozenset(), tokenized: tuple[str, np.ndarray] | None = None) -> Print:
    """copydetect's fingerprint of ``text`` (a part, its pieces starting at ``starts``), ``boilerplate`` (the
    handout's hashes) and the k-grams that span two pieces left out. The text is tokenized once, by copydetect's
    ``filter_code``; the fingerprint is made of what it returns, exactly as ``CodeFingerprint(filter=True)`` makes
    it (``tokenized``: that result, made elsewhere). copydetect drops the handout's k-grams, but one that straddles the handout's last line and the student's
    first still holds handout characters, and a handout line shorter than a k-gram (a signature) is in none of
    them: :attr:`Print.own` marks both (the characters of the handout's k-grams and of its ``lines``), and they
    are never counted or shown."""
    from copydetect import CodeFingerprint
    from copydetect.utils import hashed_kgrams

    name = NAMES[lang]
    filtered, offsets = tokenized if tokenized is not None else tokens(text, lang)
    positions = np.arange(len(filtered) + 1)
    raw = (positions + offsets[:, 1][np.clip(np.searchsorted(offsets[:, 0], positions), 0, offsets.shape[0] - 1)]
           if len(offsets) else positions)
    raw = np.minimum(raw, len(text))
    handout = boilerplate if boilerplate is not None else np.array([], dtype=np.int64)
    spanning = across(filtered, raw, starts)
    if spanning:
        boilerplate = np.union1d(handout, np.array(spanning, dtype=np.int64))
    found = CodeFingerprint(name, NOISE, WINDOW, boilerplate=boilerplate, filter=False, fp=io.StringIO(filtered))
    found.raw_code, found.offsets = text, offsets  # what CodeFingerprint(filter=True) keeps: passages map to the text
    theirs = (np.flatnonzero(np.isin(hashed_kgrams(filtered, NOISE), handout)) if len(handout) and
              len(filtered) >= NOISE else [])
    own = ~covered(theirs, len(filtered))
    if lines:
        own &= ~given_lines(text, lines)[raw[:-1]]
    kept = [i for found_at in found.hash_idx.values() for i in found_at]
    return Print(found, raw, own, int((covered(kept, len(filtered)) & own).sum()))


def across(filtered: str, raw: np.ndarray, starts: tuple[int, ...]) -> list[int]:
    """copydetect's hashes of the k-grams of ``filtered`` that span the start of a piece (``starts``: offsets
    in the text; ``raw``: each filtered character's): left out, so that what is shared lies within one cell,
    file or answer, whatever order they come in."""
    if not starts or not filtered:
        return []
    edges = np.searchsorted(raw, np.array(starts)).tolist()
    return [hash(filtered[i:i + NOISE]) for edge in edges for i in range(max(edge - NOISE, 0), edge + 1)
            if i + NOISE <= len(filtered)]
