"""What this lab's released handouts import from the course library, or tell students to call.

A released handout is a promise: every name here keeps resolving for the rest of the term, so a student
half-way through an earlier handout loses nothing when the course moves code (``util.moved``).
``NAMES`` are in their current place (``"module:name"``, or ``"module"`` for a module the text names);
``MOVED`` maps the place an earlier handout used to the current one. Add a name when a handout starts
using it (``python -m grader build --check`` says which are missing), never remove one during a term,
and record a move here when you make it. ``tests/test_surface.py`` imports every name, old and new.
"""

NAMES = (
    "util:setup",
    "util:submit",
    "util:check",
    "util:progress",
    "util.labs.lab8.graphs:graph",
    "util.labs.lab8.graphs:random_feeds",
    "util.labs.lab8.harness:end_to_end_report",
    "util.labs.lab8.harness:execution_report",
    "util.labs.lab8.harness:load_weights",
    "util.labs.lab8.harness:make_pool",
    "util.labs.lab8.harness:run_in_plan",
    "util.labs.lab8.kernel:NAIVE_SOURCE",
    "util.labs.lab8.kernel:build_library",
    "util.labs.lab8.kernel:build_naive",
    "util.labs.lab8.kernel:kernel_report",
    "util.labs.lab8.kernel:load_matmul",
    "util.labs.lab8.kernel:time_pairs",
    "util.labs.lab8.plans:course_plan",
    "util.labs.lab8.plans:course_shapes",
    "util.labs.lab8.plans:lifetimes",
    "util.labs.lab8.plans:plan_problems",
    "util.labs.lab8.plans:summarize_plan",
    "util.labs.lab8.plans:tensor_nbytes",
    "util.labs.lab8.plots:plot_plan",
)
"""Every name a released handout of this lab imports or names, in its current place."""

MOVED: dict[str, str] = {}
"""Old place -> current place, for names an earlier handout imports from where they were then."""
