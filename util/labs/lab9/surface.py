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
    "util.labs.lab9.digits:digits_onnx",
    "util.labs.lab9.digits:fold_conv_bn",
    "util.labs.lab9.digits:fold_digits_cnn",
    "util.labs.lab9.digits:trained_digits_cnn",
    "util.labs.lab9.onnxq:accuracy",
    "util.labs.lab9.onnxq:digits_arrays",
    "util.labs.lab9.onnxq:outputs",
    "util.labs.lab9.onnxq:quiet_onnxruntime",
    "util.labs.lab9.onnxq:run_all",
    "util.labs.lab9.onnxq:summarize_qdq",
    "util.labs.lab9.plots:plot_accuracy_vs_bits",
    "util.labs.lab9.plots:plot_layer_errors",
    "util.labs.lab9.qmodel:QLayer",
    "util.labs.lab9.qmodel:QModel",
    "util.labs.lab9.qmodel:maxpool2d_int8",
    "util.models:build_model",
)
"""Every name a released handout of this lab imports or names, in its current place."""

MOVED: dict[str, str] = {}
"""Old place -> current place, for names an earlier handout imports from where they were then."""
