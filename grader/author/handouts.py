"""The students' two READMEs, rendered from hand-written templates and the labs' declarations.

* ``labs/README.md``, "start here" (template ``templates/labs_README.md``): how to open a lab,
  work on it, check it and hand it in. ``python -m grader build`` writes it, ``build --check``
  fails when it is stale, like the generated notebooks.
* the student copy's ``README.md`` (template ``templates/README.md``): how to set the copy up,
  with or without Docker. ``python -m grader release DIR`` writes it into the copy.

Edit the templates, never the generated files. ``{course_map}`` in a template becomes a table of
every lab (:func:`course_map`): its notebook, title, tasks with their points and what it needs
besides Python (``Lab.requires``), so a new lab appears in both READMEs without an edit. ``{lab}`` and
``{task}`` become the first lab's name and its last task's id, for the examples of commands.
"""
from __future__ import annotations

from pathlib import Path

from grader import REPO
from util.labs import LABS

TEMPLATES = Path(__file__).resolve().parent / "templates"
LABS_README = REPO / "labs" / "README.md"
GENERATED = "<!-- Generated from grader/author/templates/{name} by the course's build: edit that file. -->\n"


def course_map(prefix: str = "") -> str:
    """A markdown table of every lab; notebook paths start with ``prefix`` (``"labs/"`` from the copy's root)."""
    rows = ["| lab | notebook | topic | tasks (points) | needs besides Python |", "|---|---|---|---|---|"]
    for name, lab in LABS.items():
        where = Path(lab.notebook)
        support = ", ".join(f"`{prefix}{where.parent}/{name}/`" for name in lab.support)
        notebook = (f"`{prefix}{where.parent}/` (the notebook and {support})" if len(where.parts) > 1
                    else f"`{prefix}{lab.notebook}`")
        tasks = ", ".join(f"{t.id} {t.title} ({t.max_points:g})" for t in lab.tasks)
        needs = ", ".join(f"`{tool}`" for tool in lab.requires) or "nothing"
        rows.append(f"| {name.removeprefix('lab')} | {notebook} | {lab.title} | {tasks} | {needs} |")
    return "\n".join(rows)


def _render(template: str, prefix: str) -> str:
    text = (TEMPLATES / template).read_text(encoding="utf-8")
    first = next(iter(LABS.values()))
    for key, value in (("{course_map}", course_map(prefix)), ("{lab}", first.name), ("{task}", first.tasks[-1].id)):
        text = text.replace(key, value)
    return GENERATED.format(name=template) + text


def labs_readme() -> str:
    """The text of ``labs/README.md``."""
    return _render("labs_README.md", "")


def release_readme() -> str:
    """The text of the student copy's ``README.md``."""
    return _render("README.md", "labs/")
