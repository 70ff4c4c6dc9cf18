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
    "util.labs.lab11",
    "util.labs.lab11.machine:GRADER_MACHINE",
    "util.labs.lab11.machine:SLOW_CORE",
    "util.labs.lab11.machine:ScriptedWork",
    "util.labs.lab11.machine:WIDE_BUS",
    "util.labs.lab11.machine:build",
    "util.labs.lab11.machine:course_input",
    "util.labs.lab11.machine:cpu_timer",
    "util.labs.lab11.machine:fixed_timer",
    "util.labs.lab11.plots:plot_batches",
    "util.labs.lab11.plots:plot_clocks",
    "util.labs.lab11.plots:plot_measured_vs_predicted",
    "util.labs.lab11.plots:plot_roofline",
    "util.labs.lab11.traces:KERNEL_SUFFIX",
    "util.labs.lab11.traces:LAYER_PREFIX",
    "util.labs.lab11.traces:annotate_layers",
    "util.labs.lab11.traces:layer_modules",
    "util.labs.lab11.traces:load_trace",
    "util.labs.lab11.traces:optimized_graph",
    "util.labs.lab11.traces:ort_session",
    "util.labs.lab11.traces:profiled_nodes",
    "util.labs.lab11.traces:read_json",
    "util.onnx_models:export_torchvision",
)
"""Every name a released handout of this lab imports or names, in its current place."""

MOVED: dict[str, str] = {}
"""Old place -> current place, for names an earlier handout imports from where they were then."""
