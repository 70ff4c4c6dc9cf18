"""The gradebook folder's one namespace: the grader's class files and the submissions' folders.

A gradebook folder (``--out``) holds both the class files the grader writes (``gradebook.csv``,
``gradebook_<lab>.csv``, ``statistics.csv``, ``report.html``, ``class.json``,
``regrade_diff.csv``, ``export_<format>.csv``, the marks of written answers ``marks.sqlite`` and the
journal SQLite keeps beside it while writing) and one folder per submission, named after what
was submitted (:func:`grader.grade.collect.folder_name`). A notebook called ``gradebook.csv.ipynb``
once took the folder ``gradebook.csv`` and the class's gradebook could not be written at all.

The rule that keeps the two apart: every class file's name ends with a suffix from
:data:`CLASS_SUFFIXES` (every writer asks :func:`class_file` for its path, which refuses any other
name), and no submission folder's name does (:func:`is_reserved`, :func:`unreserved`). Letter case
does not count, as on a case-insensitive file system (macOS, a Windows share); nor does it between two
submissions' folders (:func:`folder_key`: ``Alice`` and ``alice`` are one folder on a Mac). A folder left under
such a name by an older grader is moved aside before the class files are written
(:func:`move_reserved`).
"""
from __future__ import annotations

import os
import unicodedata
from pathlib import Path

CLASS_SUFFIXES = (".csv", ".html", ".json", ".md", ".txt", ".zip", ".png", ".log", ".sqlite", ".sqlite-journal")
"""Suffixes only the grader's class files may end with; a new kind of class file takes one of these
(or a new one added here), never a name a submission could have."""


def folder_key(name: str) -> str:
    """``name`` as a file system may compare it: letter case and Unicode normalization ignored, as
    macOS (APFS) and Windows shares do. Two folders with one key are one folder there."""
    return unicodedata.normalize("NFC", name).casefold()


def is_reserved(name: str) -> bool:
    """Whether ``name`` ends with a class file's suffix (in any letter case): no submission folder may."""
    return folder_key(name).endswith(CLASS_SUFFIXES)


def unreserved(name: str) -> str:
    """``name`` as a submission folder may be called: ``gradebook.csv`` -> ``gradebook_csv``
    (each reserved suffix's dot becomes ``_`` until none is left); other names are unchanged."""
    while is_reserved(name):
        cut = name.rindex(".")
        name = name[:cut] + "_" + name[cut + 1:]
    return name


def class_file(out: Path, name: str) -> Path:
    """The path of the class file ``name`` in the gradebook folder ``out``.

    Raises ``ValueError`` for a name without a reserved suffix: such a file could take the name of a
    submission's folder (a programming error in the grader, caught by its tests)."""
    if "/" in name or os.sep in name or not is_reserved(name):
        raise ValueError(f"class file {name!r}: expected a plain name ending in one of {', '.join(CLASS_SUFFIXES)} "
                         "(only class files may, so no submission's folder can take it); rename it")
    return Path(out) / name


def move_reserved(out: Path, record: str) -> list[tuple[str, str]]:
    """Move each submission folder in ``out`` (a folder holding ``record``) whose name is reserved, as
    an older grader may have left it, to a free unreserved name; returns (old, new) names.

    Its record keeps its source path, so the next run grades that source into the new folder."""
    moved = []
    try:
        entries = sorted(os.scandir(out), key=lambda e: e.name)
    except OSError:
        return moved
    taken = {folder_key(e.name) for e in entries}
    for entry in entries:
        if not (is_reserved(entry.name) and entry.is_dir(follow_symlinks=False)
                and os.path.isfile(os.path.join(entry.path, record))):
            continue
        base = unreserved(entry.name)
        new, count = base, 1
        while folder_key(new) in taken:
            count += 1
            new = f"{base}~{count}"
        os.rename(entry.path, os.path.join(out, new))
        taken.add(folder_key(new))
        moved.append((entry.name, new))
    return moved
