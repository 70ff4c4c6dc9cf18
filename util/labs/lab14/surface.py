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
    "util.labs.lab14.choice:FULL_WARPS",
    "util.labs.lab14.choice:PUBLIC_CANDIDATES",
    "util.labs.lab14.choice:PUBLIC_FILE",
    "util.labs.lab14.choice:PUBLIC_SHAPE",
    "util.labs.lab14.compiled:DTYPES",
    "util.labs.lab14.compiled:H100_LIMITS",
    "util.labs.lab14.compiled:PUBLIC_CONFIGS",
    "util.labs.lab14.compiled:TILE_KERNEL",
    "util.labs.lab14.compiled:compile_tile",
    "util.labs.lab14.compiled:config_name",
    "util.labs.lab14.compiled:load",
    "util.labs.lab14.launch:gpu_seconds",
    "util.labs.lab14.launch:run_flash",
    "util.labs.lab14.launch:run_flash_backward",
    "util.labs.lab14.launch:run_matmul",
    "util.labs.lab14.launch:run_softmax",
    "util.labs.lab14.machines:H100",
    "util.labs.lab14.machines:H100_FP16",
    "util.labs.lab14.machines:TOY",
    "util.labs.lab14.plots:plot_backward_traffic",
    "util.labs.lab14.plots:plot_compiled",
    "util.labs.lab14.plots:plot_launch",
    "util.labs.lab14.plots:plot_occupancy",
    "util.labs.lab14.plots:plot_roofline",
    "util.labs.lab14.plots:plot_traffic",
    "util.labs.lab14.rules:kernel_problems",
    "util.labs.lab14.traffic:counting",
)
"""Every name a released handout of this lab imports or names, in its current place."""

MOVED: dict[str, str] = {}
"""Old place -> current place, for names an earlier handout imports from where they were then."""
