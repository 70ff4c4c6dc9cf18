"""Collecting a class: which paths are submissions, what each is called, which lab it is.

Whatever the files are called or hold, every submitted path gets its own row, named after what
was submitted (never after what a link points to):

* folders are walked without following links; a link, a FIFO, a device or a socket is a
  submission that is not read (:func:`refusal` says why), so a student's ``labN.ipynb`` that links
  to the solution, or a FIFO that would block the grader, costs nothing but its own row;
* names are made safe for a folder and for every place they are shown (:func:`output_names`):
  bytes that are not UTF-8 show as ``\\xff``, control characters are dropped, names stay short and
  distinct; identical notebooks from different students are not merged: each is graded under its
  own name (the gradebook's ``identical`` column, :mod:`grader.report.class_folder`, names the others).
"""
from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from grader.core import notebook
from grader.core import records as stored_records
from grader.core.namespace import folder_key, is_reserved, unreserved
from grader.core.safe_text import LIMIT_MESSAGE, file_name, plain
from util.contract import Lab
from util.labs import LABS, get_lab

MAX_FOLDER_BYTES = 128
"""Longest result folder name, in bytes (file systems allow 255); longer names are cut and hashed."""


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))  # .ipynb_checkpoints, __pycache__, .git


def _kind(path: Path) -> str | None:
    """``link``, ``special`` (FIFO, device, socket), ``folder``, ``file``, or ``None`` if absent."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "folder"
    return "file" if stat.S_ISREG(mode) else "special"


def refusal(path: Path) -> str | None:
    """Why ``path`` is not read at all (a link, not a plain file, absent), or ``None``."""
    kind = _kind(path)
    name = file_name(path.name)
    if kind is None:
        return f"{file_name(path)}: no such file or folder"
    if kind == "link":
        return (f"{name} is a symbolic link, which the grader does not follow: submit the notebook file itself, "
                "not a link to it")
    if kind == "special":
        return f"{name} is not a regular file (a FIFO, device or socket): submit the notebook file itself"
    return None


def _walk(root: Path) -> tuple[list[Path], bool]:
    """Every ``*.ipynb`` under ``root`` (plain or not: links and FIFOs too, to be refused), without
    entering links or hidden folders; and whether there was any."""
    found = []
    for folder, subfolders, files in os.walk(root):  # os.walk does not enter linked folders
        subfolders[:] = sorted(d for d in subfolders if not _hidden(d))
        found += [Path(folder) / f for f in sorted(files) + [d for d in subfolders if _kind(Path(folder) / d) == "link"]
                  if f.endswith(".ipynb") and not _hidden(f)]
    return found, bool(found)


def _support_names() -> set[str]:
    """Folder names that labs copy next to their notebook (``cpp``): never a student's folder."""
    return {Path(name).parts[0] for lab in LABS.values() for name in lab.support if Path(name).parts}


def find_submissions(paths: Iterable[Path]) -> list[Path]:
    """What to grade: every path named directly that is not a folder (whatever it is, even absent),
    every notebook under a named folder, and every student folder (a subfolder of a named folder)
    that holds no notebook, or is a link, so a student who uploaded a ``.py``, nothing, or a link
    still gets a row saying so. A lab's support folder (a C++ lab's ``cpp/``) beside a notebook is part
    of that submission, not a student. A named folder may be a link (the instructor named it);
    nothing under it is followed."""
    found: list[Path] = []
    support = _support_names()
    for path in paths:
        if not (_kind(path) == "folder" or (_kind(path) == "link" and path.is_dir())):
            found.append(path)
            continue
        notebooks, _ = _walk(path)
        found += notebooks
        beside_notebook = any(p.parent == path for p in notebooks)
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if _hidden(entry.name) or (beside_notebook and entry.name in support):
                continue
            sub = Path(entry.path)
            if entry.is_symlink():
                if not entry.name.endswith(".ipynb"):  # a linked notebook is already in notebooks
                    found.append(sub)
            elif entry.is_dir(follow_symlinks=False) and not _walk(sub)[1]:
                found.append(sub)
    return list(dict.fromkeys(Path(os.path.abspath(p)) for p in found))  # a path named twice: one row


def folder_name(raw: str) -> str:
    """A submitted name as one safe folder name: :func:`file_name`-clean, no ``/``, not hidden, never
    ending like a class file (``gradebook.csv`` -> ``gradebook_csv``: :mod:`grader.core.namespace`), and
    at most ``MAX_FOLDER_BYTES - 8`` bytes (a cut name ends with a hash of the whole name)."""
    name = unreserved(file_name(raw, LIMIT_MESSAGE).replace("/", "_"))
    if not name or name.startswith("."):
        name = "_" + name
    if len(name.encode("utf-8")) > MAX_FOLDER_BYTES - 8:
        digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        cut = name.encode("utf-8")[: MAX_FOLDER_BYTES - 18].decode("utf-8", "ignore")
        name = f"{cut}~{digest}"
    return name


def _stem(path: Path) -> str:
    name = path.name
    return name[: -len(".ipynb")] if name.endswith(".ipynb") and len(name) > len(".ipynb") else name


def output_names(paths: list[Path]) -> list[str]:
    """A distinct, safe folder name per submission: its file name without ``.ipynb`` or, for names
    that several submissions share, its path from their common folder (``alice__lab1``; a folder
    named like its notebook is not repeated: ``labN__x/x.ipynb`` -> ``labN__x``). Paths are never
    resolved: a link is named after itself, not its target. Names that differ only in letter case or
    Unicode normalization count as one (:func:`grader.core.namespace.folder_key`): on a Mac they would
    be one folder, and one student's results would replace another's."""
    if not paths:
        return []
    absolute = [Path(os.path.abspath(p)) for p in paths]
    stems = [folder_name(_stem(p)) for p in absolute]
    keys = [folder_key(stem) for stem in stems]
    if len(set(keys)) == len(keys):
        return stems
    common = Path(os.path.commonpath([str(p.parent) for p in absolute]))

    def long_name(path: Path, dedupe: bool) -> str:
        parts = [_stem(path) if i == len(path.relative_to(common).parts) - 1 else part
                 for i, part in enumerate(path.relative_to(common).parts)]
        if dedupe and len(parts) >= 2 and parts[-2] == parts[-1]:  # a folder named like its notebook
            parts.pop()
        return folder_name("__".join(parts))

    names = [stem if keys.count(key) == 1 else long_name(p, True) for p, stem, key in zip(absolute, stems, keys)]
    if len({folder_key(name) for name in names}) != len(names):
        names = [long_name(p, False) for p in absolute]
    used: set[str] = set()
    for i, name in enumerate(names):  # names that only cleaning (or letter case) made equal (b"a\xff" and "a\\xff")
        candidate, count = name, 1
        while folder_key(candidate) in used:
            count += 1
            candidate = f"{name}~{count}"
        names[i] = candidate
        used.add(folder_key(candidate))
    return names


def resolve_lab(path: Path, lab_name: str | None) -> Lab:
    """The lab to grade ``path`` against: ``lab_name`` if given, else the notebook's ``course.lab``
    metadata, else a ``labN`` prefix of its name (or, for a folder, of a file in it).

    Raises ``FileNotFoundError`` for a path that does not exist and ``ValueError`` saying what is
    wrong when the lab cannot be told (a file that is not a notebook: with the JSON error's line
    and column).
    """
    if lab_name:
        return get_lab(lab_name)
    kind = _kind(path)
    if kind is None:
        raise FileNotFoundError(f"{file_name(path)}: no such file or folder")
    nb, problem = None, None
    if kind == "file":
        try:
            nb = notebook.read(path)
        except (ValueError, OSError) as exc:  # unreadable: still graded (0, with the reason) if its name tells the lab
            problem = str(exc)
    candidates = [notebook.metadata_lab(nb), notebook.lab_name(None, path)]
    if kind == "folder":  # a student folder without a notebook: its files' names may tell
        try:
            candidates += [notebook.lab_name(None, Path(e.name)) for e in sorted(os.scandir(path), key=lambda e: e.name)]
        except OSError:
            pass
    known = [c for c in candidates if c in LABS]
    if known:
        return get_lab(known[0])
    said = [c for c in candidates if c]
    raise ValueError(f"{file_name(path)}: " + (f"{problem}; and " if problem else "")
                     + "cannot tell which lab this is ("
                     + (f"it names {file_name(said[0])}, which is not a lab of this course" if said
                        else "no course.lab metadata and the file name does not start with labN")
                     + f"); pass --lab ({', '.join(LABS)})")


@dataclass(frozen=True)
class Submission:
    """One thing to grade."""

    name: str
    """Its result folder's name (distinct across the class)."""
    path: Path
    """The notebook (or the file or folder that should have been one)."""
    lab: str
    """The lab it is graded as."""


@dataclass(frozen=True)
class Refused:
    """A submission that is not graded at all, and why."""

    name: str
    path: Path
    reason: str
    """In a student's words: a link, not a plain file, no such file, or the lab cannot be told."""
    lab: str | None = None
    """The lab, when ``--lab`` or the file's name tells it (its row then lists the lab's tasks)."""


def keep_folders(paths: list[Path], names: list[str], out: Path) -> list[str]:
    """Result folder names for ``paths``: a path graded into ``out`` before keeps its folder, and no
    path takes a folder that holds another submission's record (it gets a longer, distinct name).

    So grading one student into a class's folder replaces that student's row, whatever name the
    class run gave it, and never overwrites another student's."""
    records = stored_records.load_all(out)
    by_source = {os.path.abspath(r.source): name for name, r in records.items() if r.source}
    taken = {folder_key(name) for name in records}
    chosen: list[str] = []
    for path, name in zip(paths, names):
        earlier = by_source.get(os.path.abspath(path))
        if earlier is not None and not is_reserved(earlier):  # (a class file's name: never kept)
            chosen.append(earlier)
            continue
        parts = list(Path(os.path.abspath(path)).with_suffix("").parts[1:])
        if len(parts) >= 2 and parts[-2] == parts[-1]:  # a folder named like its notebook (a lab with support files)
            parts.pop()
        candidate, depth = name, 2
        while folder_key(candidate) in taken or folder_key(candidate) in map(folder_key, chosen):
            candidate = folder_name("__".join(parts[-depth:])) if depth <= len(parts) else f"{name}__{depth}"
            depth += 1
        chosen.append(candidate)
    return chosen


def collect(paths: list[Path], lab: str | None, out: Path | None = None
            ) -> tuple[list[Submission], list[Refused], list[str]]:
    """Submissions to grade, those refused (with the reason), and every name in the order found
    (names kept from earlier runs into ``out``: :func:`keep_folders`). Never raises for what a
    file holds or is called."""
    found = find_submissions(paths)
    names = output_names(found)
    if out is not None:
        names = keep_folders(found, names, out)
    subs, refused = [], []
    for name, path in zip(names, found):
        reason = refusal(path)
        if reason:
            refused.append(Refused(name, path, reason, lab or notebook.lab_name(None, path)))
            continue
        try:
            subs.append(Submission(name, path, resolve_lab(path, lab).name))
        except Exception as exc:  # whatever the file holds: its own row, never the class's end
            refused.append(Refused(name, path, plain(str(exc).strip("'\""))))
    return subs, refused, names
