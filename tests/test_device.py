"""Labs use CUDA when present and the CPU otherwise, with no failure either way.

The course machines have no GPU, so the "GPU present" side is simulated: ``torch.cuda.is_available``
reports True (in this process, or in the graded kernel through a ``sitecustomize`` module) while
everything still runs on the CPU. That proves nothing in the labs or the grader assumes a GPU
away, and that what is graded does not depend on whether one is reported.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch

import util
from grader.grade.submission import grade_submission
from util.labs import LABS, get_lab
from util.models import build_model, example_input

REPO = Path(__file__).resolve().parent.parent
HARD_CUDA = re.compile(r"""\.cuda\(|\.to\(\s*['"]cuda|device\s*=\s*['"]cuda|torch\.device\(\s*['"]cuda"""
                       r"""|torch\.cuda\.(?!is_available\b)""")
"""Code that needs a GPU to run: moving to CUDA or calling into torch.cuda beyond asking if one exists."""


def test_setup_returns_cpu_without_a_gpu_and_cuda_with_one(monkeypatch):
    assert util.setup() == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert util.setup() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert util.setup() == "cuda"           # only reports it: nothing is moved, nothing initialises CUDA
    assert torch.get_num_threads() == util.THREADS


def test_this_machine_has_no_gpu_so_the_labs_run_on_the_cpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present here; the simulated tests below still cover the CPU path")
    assert util.setup() == "cpu"


def _sources() -> list[tuple[str, str]]:
    out = []
    for path in sorted([*REPO.glob("util/**/*.py"), *REPO.glob("grader/**/*.py")]):
        out.append((path.relative_to(REPO).as_posix(), path.read_text(encoding="utf-8")))
    for path in sorted([*REPO.glob("solutions/**/*.ipynb"), *REPO.glob("labs/**/*.ipynb")]):
        if ".ipynb_checkpoints" in path.parts:
            continue
        cells = nbformat.read(str(path), as_version=4).cells
        out.append((path.relative_to(REPO).as_posix(), "\n".join(c.source for c in cells if c.cell_type == "code")))
    return out


GPU_ONLY = {"util/labs/lab14/launch.py": ("gpu_seconds",)}
"""Functions that exist to time a kernel compiled on a GPU (lab 14's device benchmark): each refuses, in words,
to run without one (tested below), and nothing graded calls them."""


def _gpu_only_spans(name: str, text: str) -> list[tuple[int, int]]:
    import ast

    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return [(offsets[node.lineno - 1], offsets[node.end_lineno]) for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name in GPU_ONLY.get(name, ())]


def test_no_lab_or_course_code_requires_cuda():
    sources = _sources()
    assert any(name.startswith("solutions/") for name, _ in sources)
    found = []
    for name, text in sources:
        spans = _gpu_only_spans(name, text) if name in GPU_ONLY else []
        assert len(spans) == len(GPU_ONLY.get(name, ())), (name, "a GPU-only function listed here is gone")
        found += [(name, m.group(0)) for m in HARD_CUDA.finditer(text)
                  if not any(start <= m.start() < end for start, end in spans)]
    assert found == [], "use the device setup() returns, and only where a GPU is optional"


def test_the_gpu_only_timer_refuses_without_a_gpu(monkeypatch):
    from util.labs.lab14 import launch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="gpu_seconds needs a GPU"):
        launch.gpu_seconds("matmul", None, torch.ones(2, 2), torch.ones(2, 2))


def test_models_and_inputs_stay_on_the_cpu_when_a_gpu_is_reported(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert util.setup() == "cuda"
    model = build_model("tiny_grouped")
    x = example_input((2, 4, 16, 16))
    assert {p.device.type for p in model.parameters()} == {"cpu"} and x.device.type == "cpu"
    with torch.no_grad():
        assert model(x).shape == (2, 10)


COMPILED_ON_A_GPU = {"lab14": "its Triton kernels are compiled, not interpreted, when a GPU is reported: a simulated "
                                "GPU cannot run them (run on a real one: benchmarks/bench_lab14.py --kernels-only)"}
"""Labs whose GPU path needs a real GPU, so the simulation below says nothing about them."""
ON_THE_DEFAULT_RUN = ("lab1", "lab12")
"""A lab whose notebook uses the device setup() returns (1; lab 10 the same way, under ``-m slow``) and one whose
training meets torch's accelerator checks (12) are simulated on every run; every other lab only under ``-m slow``
(the same path, minutes more)."""
NEEDS_THE_SANDBOX = "without the sandbox (bubblewrap)"
"""How a judge that withholds data from a student process refuses to run unsandboxed (labs 12.5 and 16.5)."""
GPU_PARAMS = [pytest.param(name, marks=() if name in ON_THE_DEFAULT_RUN else pytest.mark.slow)
              for name in LABS if name not in COMPILED_ON_A_GPU]


@pytest.mark.notebook
@pytest.mark.parametrize("lab_name", GPU_PARAMS)
def test_solution_gets_full_marks_when_the_kernel_reports_a_gpu(lab_name, tmp_path, monkeypatch, request):
    """The graded kernel believes a GPU exists (sitecustomize patches torch): same full marks, but for a task whose
    judge withholds data from a student process, which the sandbox must do (this run has none: the patch lives
    in /tmp, which the sandbox hides) and which says so."""
    import shutil
    import tempfile

    # a folder anyone may read: a root grader runs the kernel as an unprivileged user
    site = Path(tempfile.mkdtemp(prefix="site-"))
    site.chmod(0o755)
    (site / "sitecustomize.py").write_text(
        "import torch\ntorch.cuda.is_available = lambda: True  # simulated GPU (tests/test_device.py)\n"
        "# an optimizer's step asks the accelerator whether it is capturing a CUDA graph, which needs a real\n"
        "# driver: with no GPU behind the simulation, that torch-internal question is answered no\n"
        "torch.optim.Optimizer._accelerator_graph_capture_health_check = lambda self: None\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    request.addfinalizer(lambda: shutil.rmtree(site, ignore_errors=True))
    lab = get_lab(lab_name)
    # sandbox off: the sandbox hides /tmp, where the patch lives (the device question is not the sandbox's)
    result = grade_submission(REPO / "solutions" / lab.notebook, lab, tmp_path / "out", sandbox=False)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    unsandboxed = [f for f in failing if NEEDS_THE_SANDBOX in f[2]]
    assert failing == unsandboxed and {task for task, _, _ in unsandboxed} <= {"12.5", "16.5"}
    lost = sum(c.max_score for t in result.tasks for c in t.checks if c.status != "passed")
    assert result.score == result.max_score - lost and result.max_score == lab.auto_points  # written ones: by hand
    executed = nbformat.read(str(tmp_path / "out" / "executed.ipynb"), as_version=4)
    if lab_name == "lab1":  # its first cell says which device setup() returned
        printed = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.outputs)
        assert "a GPU is available" in printed
