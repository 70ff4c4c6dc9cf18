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
    "util.labs.lab10.gpt:GPTConfig",
    "util.labs.lab10.gpt:TINY",
    "util.labs.lab10.gpt:TinyGPT",
    "util.labs.lab10.gpt:prompt_ids",
    "util.labs.lab10.gpt:seeded_gpt",
    "util.labs.lab15.chunked:ChunkConfig",
    "util.labs.lab15.chunked:Chunks",
    "util.labs.lab15.chunked:simulate_chunked",
    "util.labs.lab15.paged:OutOfBlocks",
    "util.labs.lab15.paged:random_trace",
    "util.labs.lab15.paged:replay",
    "util.labs.lab15.paged:trace_problems",
    "util.labs.lab15.prefix:prefix_trace",
    "util.labs.lab15.prefix:replay",
    "util.labs.lab15.prefix:summary",
    "util.labs.lab15.prefix:trace_problems",
    "util.labs.lab15.serving:Decision",
    "util.labs.lab15.serving:GPT2_SMALL_A100",
    "util.labs.lab15.serving:Request",
    "util.labs.lab15.serving:ServeConfig",
    "util.labs.lab15.serving:View",
    "util.labs.lab15.serving:poisson_trace",
    "util.labs.lab15.serving:simulate",
    "util.labs.lab15.speculative:CountingTarget",
    "util.labs.lab15.speculative:Uniforms",
    "util.labs.lab15.speculative:draft_of",
    "util.labs.lab15.speculative:rounds",
    "util.labs.lab15.speculative:sample",
    "util.labs.lab15.speculative:uniform_stream",
    "util.labs.lab15.swapping:SwapConfig",
    "util.labs.lab15.swapping:SwapDecision",
    "util.labs.lab15.swapping:simulate_swapping",
    "util.labs.lab15.tokenizer:course_text",
    "util.labs.lab15.tokenizer:pretokenize",
    "util.labs.lab15.tokenizer:show",
)
"""Every name a released handout of this lab imports or names, in its current place."""

MOVED: dict[str, str] = {}
"""Old place -> current place, for names an earlier handout imports from where they were then."""
