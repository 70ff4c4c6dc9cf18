"""Which files of a build context a target of docker/Dockerfile copies into its image, computed without Docker.

This reads the Dockerfile's stages and ``COPY`` lines, applies ``.dockerignore`` and lists every
file that lands in the image, with where it comes from, in a second (``tests/test_docker.py``; the
images themselves are built and checked by ``tests/test_images.py``, where Docker runs). The student
image is built from the students' copy (``python -m grader release DIR``), which
``grader/author/release.py`` derives from this list; audit it with::

    python -m grader release build/student
    python docker/image_files.py student --context build/student   # image path <- path in the copy

Supported: ``FROM <image> [AS <name>]`` (stages built on earlier stages inherit their files),
``WORKDIR``, and ``COPY [--chown=...] <src>... <dest>`` in shell form, where a source is a file, a
folder (its contents are copied) or a glob; ``ARG NAME=default`` lines before the first ``FROM``
fill ``${NAME}`` in ``FROM`` lines. What a ``RUN`` writes (the virtual environment) is not listed. ``.dockerignore`` lines are globs matched against the
path and each of its parent folders (``**/`` matches any depth), with ``!`` exceptions, as Docker
does. ``ADD`` and ``COPY --from`` are refused rather than guessed.
"""
from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "docker" / "Dockerfile"


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction, continuation lines joined."""

    keyword: str
    """Upper case, e.g. ``COPY``."""
    args: str
    """Everything after the keyword."""
    line: int
    """Line number where it starts (1-based)."""


@dataclass
class Stage:
    """One ``FROM`` ... up to the next ``FROM``."""

    base: str
    """The image or earlier stage it starts from."""
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        """This stage's own instructions with ``keyword``."""
        return [i for i in self.instructions if i.keyword == keyword]


def instructions(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile, comments dropped and ``\\`` continuations joined."""
    out: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    return out


def _substitute(text: str, values: dict[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` replaced by their values (a name without one is left as it is)."""
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))",
                  lambda m: values.get(m.group(1) or m.group(2), m.group(0)), text)


def stages(path: Path = DOCKERFILE) -> list[Stage]:
    """The stages of a Dockerfile, in order; a ``FROM`` names its base with the defaults of the ``ARG``
    lines before the first ``FROM`` (``ARG BASE=python:...`` then ``FROM ${BASE}``), as Docker does
    when no ``--build-arg`` is given."""
    out: list[Stage] = []
    defaults: dict[str, str] = {}
    for ins in instructions(path.read_text(encoding="utf-8")):
        if ins.keyword == "FROM":
            words = ins.args.split()
            words = [w for w in words if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            out.append(Stage(_substitute(words[0], defaults), name))
        elif not out:
            if ins.keyword != "ARG":
                raise ValueError(f"{path}:{ins.line}: {ins.keyword} before the first FROM")
            name, _, value = ins.args.partition("=")
            if value:
                defaults[name.strip()] = value.strip().strip('"')
        else:
            out[-1].instructions.append(ins)
    return out


def lineage(all_stages: list[Stage], target: str) -> list[Stage]:
    """``target`` and the stages it is built on, the first base first."""
    by_name = {s.name: s for s in all_stages if s.name}
    if target not in by_name:
        raise KeyError(f"the Dockerfile has no stage {target!r}; it has {', '.join(by_name)}")
    chain = [by_name[target]]
    while chain[0].base in by_name:
        chain.insert(0, by_name[chain[0].base])
    return chain


def ignore_patterns(context: Path) -> list[str]:
    """The lines of ``<context>/.dockerignore`` (comments and blanks dropped)."""
    path = context / ".dockerignore"
    if not path.exists():
        return []
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


@lru_cache(maxsize=None)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A Docker path glob as a regex: ``*`` and ``?`` stay inside one folder, ``**`` spans folders.

    Compiled once per pattern (a context walk matches each ``.dockerignore`` line against every path)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.find("]", i)
            out, i = (out + pattern[i:end + 1], end + 1) if end > 0 else (out + re.escape("["), i + 1)
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def _matches(pattern: str, rel: str) -> bool:
    """Whether ``pattern`` matches ``rel`` or one of its parent folders (whose contents it then excludes)."""
    regex = glob_regex(pattern.strip("/"))
    parts = rel.split("/")
    return any(regex.match("/".join(parts[:i])) for i in range(1, len(parts) + 1))


def is_ignored(rel: str, patterns: list[str]) -> bool:
    """Whether ``.dockerignore`` keeps the context path ``rel`` out (the last matching line wins)."""
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if _matches(pattern.lstrip("!"), rel):
            ignored = not negated
    return ignored


def _context_files(context: Path, patterns: list[str]) -> list[str]:
    """The files of ``context`` that ``.dockerignore`` sends to the build, in path order.

    A folder the patterns ignore is not walked into when no ``!`` line could bring a file inside it back (the
    repository's ``.venv``, ``.git`` and ``build`` hold tens of thousands of files); symbolic links to folders
    are not followed, as Docker sends the link itself."""
    exceptions = any(pattern.startswith("!") for pattern in patterns)
    files = []
    for top, folders, names in os.walk(context):
        rel_top = Path(top).relative_to(context).as_posix()
        prefix = "" if rel_top == "." else rel_top + "/"
        if not exceptions:
            folders[:] = [f for f in folders if not is_ignored(prefix + f, patterns)]
        files += [prefix + name for name in names
                  if os.path.isfile(os.path.join(top, name)) and not is_ignored(prefix + name, patterns)]
    return sorted(files, key=lambda rel: rel.split("/"))


def _copy(ins: Instruction, workdir: PurePosixPath, sent: list[str], context: Path) -> dict[str, str]:
    words = shlex.split(ins.args)
    flags = [w for w in words if w.startswith("--")]
    if any(f.startswith("--from") for f in flags):
        raise ValueError(f"line {ins.line}: COPY --from is not supported here")
    words = [w for w in words if not w.startswith("--")]
    if len(words) < 2:
        raise ValueError(f"line {ins.line}: COPY needs a source and a destination")
    *sources, dest = words
    dest_path = PurePosixPath(dest) if dest.startswith("/") else workdir / dest
    into_folder = dest.endswith("/") or dest in (".", "./") or len(sources) > 1
    out: dict[str, str] = {}
    for source in sources:
        source = source.strip("/") if source not in (".", "./") else ""
        if any(ch in source for ch in "*?["):
            regex = glob_regex(source)
            matched = [rel for rel in sent if regex.match(rel)]
            if not matched:
                raise ValueError(f"line {ins.line}: COPY {source} matches no file of the build context")
            for rel in matched:
                out[str(dest_path / PurePosixPath(rel).name)] = rel
            into_folder = True
            continue
        prefix = f"{source}/" if source else ""
        inside = [rel for rel in sent if rel.startswith(prefix)]
        if source in sent:  # a single file
            target = dest_path / PurePosixPath(source).name if into_folder else dest_path
            out[str(target)] = source
        elif inside:        # a folder: its contents
            for rel in inside:
                out[str(dest_path / rel[len(prefix):])] = rel
        else:
            raise ValueError(f"line {ins.line}: COPY {source or '.'} is not in the build context")
    return out


def image_files(target: str, dockerfile: Path = DOCKERFILE, context: Path = REPO) -> dict[str, str]:
    """Every file ``COPY`` puts into the image of ``target``: image path -> context-relative source."""
    sent = _context_files(context, ignore_patterns(context))
    workdir = PurePosixPath("/")
    files: dict[str, str] = {}
    for stage in lineage(stages(dockerfile), target):
        for ins in stage.instructions:
            if ins.keyword == "ADD":
                raise ValueError(f"line {ins.line}: use COPY, not ADD (ADD can fetch URLs and unpack archives)")
            if ins.keyword == "WORKDIR":
                workdir = workdir / ins.args
            elif ins.keyword == "COPY":
                files.update(_copy(ins, workdir, sent, context))
    return files


def main(argv: list[str] | None = None) -> int:
    """``python docker/image_files.py [TARGET]``: one line per file of the image, ``image path  <-  source``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python docker/image_files.py",
        description="List every file a target of docker/Dockerfile copies into its image, computed from the "
                    "Dockerfile's COPY lines and .dockerignore, without Docker: one line per file, "
                    "'image path  <-  repository path'.")
    parser.add_argument("target", nargs="?", default="student",
                        help="the Dockerfile stage to list (student or grader; default: %(default)s)")
    parser.add_argument("--context", type=Path, default=REPO,
                        help="the build context (default: this repository; the student image's is the students' "
                             "copy, python -m grader release DIR)")
    args = parser.parse_args(argv)
    if args.target == "student" and (args.context / "grader" / "references").exists():
        print(f"image_files.py: note: {args.context} holds grader/references: the student target refuses such a "
              "context; it is built from the students' copy (python -m grader release DIR, then --context DIR)",
              file=sys.stderr)
    try:
        files = image_files(args.target, context=args.context)
    except (KeyError, ValueError) as exc:
        print(f"image_files.py: {str(exc).strip(chr(34) + chr(39))}", file=sys.stderr)
        return 2
    for image_path, source in sorted(files.items()):
        print(f"{image_path}  <-  {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
