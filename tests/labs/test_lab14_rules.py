"""What a graded Triton kernel may be written with (``util.labs.lab14.rules``), read from its source alone: the
solution's kernels pass, every construct that could reach past Triton's language is refused with a reason, and a
kernel compiled by the grader sees ``tl`` and a few builtins, nothing of the process around it."""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from lab14_solution import KERNELS, source  # noqa: E402

from util.labs import get_lab  # noqa: E402
from util.labs.lab14 import launch  # noqa: E402
from util.labs.lab14.rules import kernel_problems  # noqa: E402

PARAMETERS = {"matmul": launch.MATMUL_PARAMETERS, "softmax": launch.SOFTMAX_PARAMETERS, "flash": launch.FLASH_PARAMETERS,
              "backward": launch.FLASH_BACKWARD_PARAMETERS}
HEAD = "@triton.jit\ndef softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):\n"
BODY = "    row = tl.program_id(0)\n"


def problems(body: str, head: str = HEAD) -> list[str]:
    return kernel_problems(head + body, "softmax_kernel", PARAMETERS["softmax"])


@pytest.mark.parametrize("kind", list(KERNELS))
def test_the_solutions_kernels_follow_the_rules(kind):
    assert kernel_problems(source(kind), KERNELS[kind], PARAMETERS[kind]) == []


@pytest.mark.parametrize("line, reason", [
    ("    import os\n", "an import is not allowed in a graded kernel (line 4)"),
    ("    f = lambda: 0\n", "a lambda is not allowed in a graded kernel (line 4)"),
    ("    xs = [i for i in range(3)]\n", "a comprehension is not allowed in a graded kernel (line 4)"),
    ("    global row\n", "global is not allowed in a graded kernel (line 4)"),
    ("    with row:\n        pass\n", "with is not allowed in a graded kernel (line 4)"),
    ("    def inner():\n        pass\n", "a nested function is not allowed in a graded kernel (line 4)"),
    ("    name = f'{row}'\n", "an f-string is not allowed in a graded kernel (line 4)"),
    ("    raise ValueError()\n", "raise is not allowed in a graded kernel (line 4)"),
    ("    x = interpreter_builder\n", "interpreter_builder is not a parameter or a variable of the kernel, nor tl or an "
                                    "allowed builtin (line 4): a graded kernel is run alone, so write helpers inline"),
    ("    x = _active\n", "names starting with _ are not allowed (_active, line 4)"),
    ("    x = row.__class__\n", "attributes starting with _ are not allowed (.__class__, line 4)"),
    ("    x = row.handle\n", ".handle is not allowed in a graded kernel (line 4); allowed on values: T, broadcast_to, "
                           "dtype, expand_dims, permute, reshape, shape, to, trans"),
    ("    x = tl.core\n", "tl.core is not among the tl functions a graded kernel may use (line 4)"),
    ("    tl.atomic_add(x_ptr, 1.0)\n", "tl.atomic_add is not among the tl functions a graded kernel may use (atomics "
                                      "are not counted) (line 4)"),
    ("    tl.device_print('x', row)\n", "tl.device_print is not among the tl functions a graded kernel may use (line 4)"),
    ("    helper(x_ptr)\n", "helper(...) cannot be called in a graded kernel (line 4): only tl functions and abs, float, "
                          "int, len, max, min, range"),
    ("    for i in iter(range(2)):\n        pass\n", "a for loop runs over range(...), tl.range(...) or "
                                                   "tl.static_range(...) (line 4)"),
    ("    range = 3\n", "range may not be assigned in a kernel (line 4)"),
    ("    return row\n", "a kernel returns nothing: store its results with tl.store (line 4)"),
    ("    tl.store(x_ptr, **row)\n", "**keyword unpacking is not allowed (line 4)"),
])
def test_each_construct_that_reaches_past_the_language_is_refused_with_its_reason(line, reason):
    assert reason in problems(BODY + line), problems(BODY + line)


def test_the_signature_and_the_decorator_are_the_tasks():
    wrong = "@triton.jit\ndef softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, BLOCK: tl.constexpr):\n"
    assert problems(BODY, wrong) == ["softmax_kernel must take exactly (x_ptr, y_ptr, n_cols, stride_x, stride_y, "
                                     "BLOCK), in that order, without defaults; it takes (x_ptr, y_ptr, n_cols, stride_x, "
                                     "BLOCK)"]
    assert problems(BODY, HEAD.replace("@triton.jit", "@other.decorator")) == [
        "softmax_kernel may be decorated with @triton.jit only"]
    assert problems(BODY, HEAD.replace("BLOCK: tl.constexpr", "BLOCK: int")) == [
        "parameter BLOCK may be annotated tl.constexpr or not at all (line 2)"]
    assert problems(BODY, "import os\n" + HEAD) == ["the source of softmax_kernel must be one function definition and "
                                                    "nothing else"]


def test_a_kernel_the_grader_compiles_sees_tl_and_a_few_builtins_only():
    compiled = launch.compile_kernel(source("softmax"), "softmax_kernel")
    names = set(compiled.fn.__globals__) - {"__builtins__", "__name__"}
    assert names == {"tl", "softmax_kernel"}  # and itself, which the rules keep it from naming
    assert sorted(compiled.fn.__globals__["__builtins__"]) == ["abs", "float", "int", "len", "max", "min", "range"]
    y, traffic = launch.run_softmax(compiled, torch.tensor([[1.0, 2.0, 3.0]]))
    assert torch.allclose(y, torch.softmax(torch.tensor([[1.0, 2.0, 3.0]]), -1)) and traffic.total_bytes == 24
    # running it, Triton's interpreter adds its own names to those globals (its builder among them): the rules
    # refuse a kernel that names any of them
    added = set(compiled.fn.__globals__) - names - {"__builtins__", "__name__"}
    assert "interpreter_builder" in added and len(added) > 20
    for name in sorted(added):
        assert problems(BODY + f"    x = {name}\n"), name


def test_the_notebook_refuses_to_save_a_kernel_the_grader_would_not_run(tmp_path, monkeypatch):
    import linecache

    import triton
    import triton.language as tl

    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path))
    text = HEAD + BODY + "    tl.store(y_ptr + row, tl.load(x_ptr + row))\n    tl.device_print('row', row)\n"
    namespace = {"triton": triton, "tl": tl}
    linecache.cache["<rules test>"] = (len(text), None, text.splitlines(True), "<rules test>")
    exec(compile(text, "<rules test>", "exec"), namespace)
    run_case = get_lab("lab14").task("14.4").run_case
    with pytest.raises(ValueError, match="the grader runs softmax_kernel only if it is written in Triton's language "
                                         "alone: tl.device_print is not among"):
        run_case(namespace["softmax_kernel"], {"rows": 2, "cols": 3, "seed": 0})


LIST = ("a Python list is allowed only as a call's argument (a shape, line 4): a list lives only in the interpreter, "
        "a GPU kernel holds its blocks in tensors (tl.zeros, tl.join, ...)")
TARGET = "is not allowed (line 4): a kernel's values are immutable on a GPU, so assign a new name (x = ...) instead"


@pytest.mark.parametrize("line, reason", [
    ("    held = [row]\n", LIST),
    ("    held = (row,) + [row]\n", LIST),
    ("    x_ptr.dtype = row\n", "assigning to an attribute " + TARGET),
    ("    x_ptr.shape[0] = row\n", "assigning to an element " + TARGET),
    ("    a, x_ptr.to = row, row\n", "assigning to an attribute " + TARGET),
    ("    for x_ptr.to in range(3):\n        pass\n", "assigning to an attribute " + TARGET),
])
def test_what_only_the_interpreter_runs_is_refused(line, reason):
    assert reason in problems(BODY + line.replace("line 4", "")), problems(BODY + line)


@pytest.mark.parametrize("line", ["    z = tl.zeros([BLOCK], dtype=tl.float32)\n",
                                  "    z = tl.full(shape=[BLOCK], value=0.0, dtype=tl.float32)\n",
                                  "    a, b = row, (row, row)\n"])
def test_a_list_as_a_shape_and_tuples_are_allowed(line):
    assert problems(BODY + line) == []
