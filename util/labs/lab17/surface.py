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
    "util.labs.lab17.configs",
    "util.labs.lab17.configs:CHINCHILLA",
    "util.labs.lab17.configs:DEEPSEEK_V3",
    "util.labs.lab17.configs:GPU",
    "util.labs.lab17.configs:H100",
    "util.labs.lab17.configs:LLAMA3_8B",
    "util.labs.lab17.configs:MIXTRAL_8X7B",
    "util.labs.lab17.configs:ModelConfig",
    "util.labs.lab17.configs:TrainingPlan",
    "util.labs.lab17.configs:router_logits",
    "util.labs.lab17.moe:build_moe",
    "util.labs.lab17.moe:measured",
    "util.labs.lab17.plots:plot_kv_bytes",
    "util.labs.lab17.plots:plot_loss_surface",
    "util.labs.lab17.plots:plot_memory_parts",
    "util.labs.lab17.plots:plot_moe_counts",
    "util.labs.lab17.scaling:NOISE",
    "util.labs.lab17.scaling:RATIOS",
    "util.labs.lab17.scaling:SIZES",
    "util.labs.lab17.scaling:TRUTH",
    "util.labs.lab17.scaling:training_runs",
)
"""Every name a released handout of this lab imports or names, in its current place."""

MOVED: dict[str, str] = {}
"""Old place -> current place, for names an earlier handout imports from where they were then."""
