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
    "util.labs.lab10.gpt:TINY",
    "util.labs.lab10.gpt:TinyGPT",
    "util.labs.lab10.gpt:seeded_gpt",
    "util.labs.lab16.costs:count_macs",
    "util.labs.lab16.costs:count_params",
    "util.labs.lab16.digits:accuracy",
    "util.labs.lab16.digits:teacher_logits",
    "util.labs.lab16.digits:trained_digits",
    "util.labs.lab16.distill:UNLABELED",
    "util.labs.lab16.distill:distillation_data",
    "util.labs.lab16.distill:loss_gradient",
    "util.labs.lab16.distill:train_student",
    "util.labs.lab16.distill:value_inputs",
    "util.labs.lab16.nets:ConvNet",
    "util.labs.lab16.nets:build_convnet",
    "util.labs.lab16.nets:lora_values",
    "util.labs.lab16.nets:small_student",
    "util.labs.lab16.plots:plot_latency",
    "util.labs.lab16.plots:plot_rank",
    "util.labs.lab16.plots:plot_schedule",
    "util.labs.lab16.plots:plot_sensitivity",
    "util.labs.lab16.prune:apply_masks",
    "util.labs.lab16.prune:fine_tune",
    "util.labs.lab16.prune:prunable",
    "util.labs.lab16.residual:ResidualNet",
    "util.labs.lab16.residual:batchnorm_of",
    "util.labs.lab16.residual:best_latency",
    "util.labs.lab16.residual:build_residual",
    "util.labs.lab16.residual:masked_residual",
    "util.labs.lab16.residual:unstructured_like",
    "util.labs.lab16.schedule:prune_gradually",
    "util.labs.lab16.schedule:zero_fraction",
)
"""Every name a released handout of this lab imports or names, in its current place."""

MOVED: dict[str, str] = {}
"""Old place -> current place, for names an earlier handout imports from where they were then."""
