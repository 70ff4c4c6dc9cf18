"""What this lab's released handouts import from the course library, or tell students to call.

A released handout is a promise: every name here keeps resolving for the rest of the term, so a student
half-way through an earlier handout loses nothing when the course moves code (``util.moved``).
``NAMES`` are in their current place (``"module:name"``, or ``"module"`` for a module the text names);
``MOVED`` maps the place an earlier handout used to the current one. Add a name when a handout starts
using it (``python -m grader build --check`` says which are missing), never remove one during a term,
and record a move here when you make it. ``tests/test_surface.py`` imports every name, old and new.
"""

NAMES = (
    "util:check",
    "util:progress",
    "util:setup",
    "util:submit",
    "util.labs.lab13.hold:held_model",
    "util.labs.lab13.nets:batch",
    "util.labs.lab13.nets:build_mlp",
    "util.labs.lab13.pipeline:replay",
    "util.labs.lab13.plots:plot_bytes_per_rank",
    "util.labs.lab13.plots:plot_costs",
    "util.labs.lab13.plots:plot_schedule",
    "util.labs.lab13.plots:plot_timeline",
    "util.labs.lab13.plots:plot_zero_memory",
    "util.labs.lab13.ranks:RankError",
    "util.labs.lab13.ranks:run_ranks",
    "util.labs.lab13.timeline:traced",
)
"""Every name a released handout of this lab imports or names, in its current place."""

MOVED: dict[str, str] = {}
"""Old place -> current place, for names an earlier handout imports from where they were then."""
