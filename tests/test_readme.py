"""The README and the guides it links (docs/) stay true: their commands parse, CI runs the quickstart,
the course map matches the labs, every guide is linked and every link leads somewhere."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from grader import cli
from util.labs import LABS

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
GUIDES = sorted((REPO / "docs").glob("*.md"))
"""The guides under docs/ (instructors, TAs, the trust model...), each linked from the README."""
DOCS = README + "".join(path.read_text(encoding="utf-8") for path in GUIDES)


def _code_lines(text: str) -> list[str]:
    """Lines of the fenced code blocks, comments dropped, continuation lines joined."""
    lines, inside, pending = [], False, ""
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        line = line.split(" #")[0].rstrip() if not line.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        if pending + line:
            lines.append((pending + line).strip())
        pending = ""
    return lines


GRADER_COMMANDS = [line for line in _code_lines(DOCS) if line.startswith("python -m grader")]


INTERNAL_SUBCOMMANDS = {"autograde"}
"""Run by Gradescope's ``run_autograder``, not typed by people; the README names it in prose."""


def test_the_readme_shows_every_grader_subcommand():
    import argparse

    from grader.cli import parser

    actions = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    subcommands = set(actions[0].choices)
    used = {shlex.split(line)[3] for line in GRADER_COMMANDS}
    assert used == subcommands - INTERNAL_SUBCOMMANDS
    assert "autograde" in DOCS


@pytest.mark.parametrize("line", GRADER_COMMANDS)
def test_every_grader_command_in_the_readme_parses(line):
    argv = shlex.split(line.replace("[", "").replace("]", ""))[3:]
    cli.parser().parse_args(argv)  # argparse exits (SystemExit) on an unknown subcommand or flag


def test_the_grader_image_command_parses_and_has_the_sandbox_options():
    """docs/images.md (where the README points for the images) runs the grader image with a real subcommand
    and the two security options measured to let bubblewrap run in it."""
    images = (REPO / "docs" / "images.md").read_text(encoding="utf-8")
    assert "docs/images.md" in README
    [line] = [text for text in _code_lines(images) if text.startswith("docker run") and "ml-cost-course:grader" in text]
    cli.parser().parse_args(shlex.split(line.split("ml-cost-course:grader", 1)[1]))
    assert "--security-opt seccomp=unconfined --security-opt systempaths=unconfined" in line


def test_ci_runs_the_readme_quickstart():
    quickstart = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    steps = _code_lines(quickstart)
    assert steps == ["docker/setup.sh", ". .venv/bin/activate",
                     "python -m grader grade grader/examples -j 2 --out build/gradebook", "python -m pytest"]
    ci = _code_lines("```\n" + (REPO / ".ci" / "run").read_text() + "\n```")
    assert "docker/setup.sh .venv" in ci and ". .venv/bin/activate" in ci
    # the README's grading of the example class, on the examples each lab grades on every run (the README says so)
    assert 'mapfile -t sample < <(python -m grader.author.build)' in ci
    assert 'python -m grader grade "${sample[@]}" -j 2 --out build/gradebook --no-progress' in ci
    assert "python -m grader.author.build" in README and "-m slow" in README
    # the README's test command, then the images' tests and the class server's in one step of their own
    # (pyproject's addopts leaves both out)
    assert ci[-1] == 'COURSE_IMAGES_REQUIRED=1 python -m pytest -m "images or hub"'
    assert "python -m pytest" in ci and ci.index("python -m pytest") < len(ci) - 1


@pytest.mark.parametrize("lab_name", list(LABS))
def test_course_map_lists_each_lab_with_its_tasks_and_points(lab_name):
    lab = LABS[lab_name]
    [row] = [line for line in README.splitlines() if line.startswith(f"| {lab_name.removeprefix('lab')} |")]
    where = f"labs/{lab.notebook}" if "/" not in lab.notebook else f"labs/{Path(lab.notebook).parent}/"
    assert f"`{where}" in row
    for task in lab.tasks:
        assert re.search(rf"{re.escape(task.id)} [^,|]*\({task.max_points:g}\)", row), (task.id, row)
    assert len(re.findall(r"\b\d+\.\d+ ", row.split("|")[5])) == len(lab.tasks)


@pytest.mark.parametrize("lab_name", list(LABS))
def test_course_map_counts_each_labs_written_points(lab_name):
    """The column 'written, marked by hand (points)': the total, each question marked with its points, the
    practice ones by name; the points are part of the tasks' (the lab still totals 100)."""
    lab = LABS[lab_name]
    [row] = [line for line in README.splitlines() if line.startswith(f"| {lab_name.removeprefix('lab')} |")]
    column = row.split("|")[6].strip()
    graded = [q for q in lab.written if q.points]
    if not lab.written:
        assert column == "none yet"
        return
    assert column.startswith(f"{sum(q.points for q in graded):g}: ")
    assert re.findall(r"([\w-]+) \(([\d.]+)\)", column) == [(q.label, f"{q.points:g}") for q in graded]
    practice = [q.label for q in lab.written if not q.points]
    assert column.endswith(f"; for practice: {', '.join(practice)}" if practice else ")")
    assert lab.max_points == 100


def _links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [target for target in re.findall(r"\]\(([^)\s]+)\)", text)
            if not target.startswith(("http", "mailto:", "attachment:"))]  # attachment: a notebook's image, quoted


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}


def test_every_guide_is_linked_from_the_readme():
    assert {p.name for p in GUIDES} >= {"instructors.md", "tas.md", "trust_model.md"}
    linked = {(REPO / target.split("#")[0]).resolve() for target in _links(REPO / "README.md") if target.split("#")[0]}
    assert [p.name for p in GUIDES if p.resolve() not in linked] == []


@pytest.mark.parametrize("path", [REPO / "README.md", *GUIDES], ids=lambda p: p.name)
def test_every_link_leads_to_a_file_and_heading_that_exist(path):
    broken = []
    for target in _links(path):
        file, _, anchor = target.partition("#")
        destination = (path.parent / file).resolve() if file else path
        if not destination.exists():
            broken.append(target)
        elif anchor and destination.suffix == ".md" and anchor not in _anchors(destination):
            broken.append(target)
    assert broken == []
