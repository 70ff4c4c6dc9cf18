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
    "util.data:digits_split",
    "util.labs.lab12.executor:Chain",
    "util.labs.lab12.executor:run_plan",
    "util.labs.lab12.executor:uniform_chain",
    "util.labs.lab12.graphs:build_graph",
    "util.labs.lab12.graphs:conv2d_vjp",
    "util.labs.lab12.graphs:feeds",
    "util.labs.lab12.graphs:forward_values",
    "util.labs.lab12.graphs:max_pool2d_vjp",
    "util.labs.lab12.graphs:op_name",
    "util.labs.lab12.graphs:parameter_names",
    "util.labs.lab12.nets:build_net",
    "util.labs.lab12.plots:plot_memory",
    "util.labs.lab12.schedule:training_graph",
    "util.models:build_model",
)
"""Every name a released handout of this lab imports or names, in its current place."""

MOVED: dict[str, str] = {}
"""Old place -> current place, for names an earlier handout imports from where they were then."""
