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
    "util.labs.lab10.fusions:fusion_summary",
    "util.labs.lab10.fusions:onnx_logits",
    "util.labs.lab10.fusions:op_counts",
    "util.labs.lab10.gpt",
    "util.labs.lab10.gpt:GPT2_SMALL",
    "util.labs.lab10.gpt:GPTConfig",
    "util.labs.lab10.gpt:TINY",
    "util.labs.lab10.gpt:TinyGPT",
    "util.labs.lab10.gpt:build_gpt",
    "util.labs.lab10.gpt:prompt_ids",
    "util.labs.lab10.gpt:seeded_gpt",
    "util.labs.lab10.recorder:StepRecorder",
)
"""Every name a released handout of this lab imports or names, in its current place."""

MOVED: dict[str, str] = {}
"""Old place -> current place, for names an earlier handout imports from where they were then."""
