"""The course's labs, each declared once in its own module (see ``util/contract.py``)."""
from __future__ import annotations

from util.contract import Lab, Task

from . import lab1, lab2, lab3, lab4

LABS: dict[str, Lab] = {lab.name: lab for lab in (lab1.LAB, lab2.LAB, lab3.LAB, lab4.LAB)}
"""Every lab by name, in course order."""


def get_lab(name: str) -> Lab:
    """The lab called ``name`` (``"lab1"``), or a ``KeyError`` listing the labs there are."""
    try:
        return LABS[name]
    except KeyError:
        raise KeyError(f"no lab {name!r}; the labs are {', '.join(LABS)}") from None


def find_task(task_id: str) -> tuple[Lab, Task]:
    """The lab and task for an id such as ``"1.4"``."""
    for lab in LABS.values():
        for task in lab.tasks:
            if task.id == task_id:
                return lab, task
    known = ", ".join(t.id for lab in LABS.values() for t in lab.tasks)
    raise KeyError(f"there is no task {task_id!r}; the tasks are {known}")
