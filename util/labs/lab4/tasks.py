"""Lab 4, libtorch C++ model analysis (GoogLeNet as TorchScript): the one declaration of its tasks.

A submission is a folder: the notebook and its ``cpp/`` project (``support``), copied together into
the grader's scratch folder, where the notebook builds the C++ (so the compiler runs in the sandbox).
Task 4.0 is Python (the TorchScript export); tasks 4.1-4.3 are the student's C++, which the grader
also runs on models the notebook never shows (ResNet-18, MobileNetV2 with depthwise convolutions,
``tiny_addmm``: grouped and dilated convolutions, a functional ``torch.addmm``, a module called
twice; and ``tiny_tied``: a weight two modules share, a transposed convolution), exported by the course's own ``util.labs.lab4.torchscript.export`` so that a slip in 4.0 is not
charged again. A C++ build error fails every check of 4.1-4.3 with the compiler's message; 4.0 keeps
its points.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Written
from util.labs.lab4.public_checks import CHECKS

CPP = ("lab4_libtorch/cpp/CMakeLists.txt", "lab4_libtorch/cpp/scaffold.h", "lab4_libtorch/cpp/scaffold.cpp",
       "lab4_libtorch/cpp/analysis.cpp")


def _call_export(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """Call the student's ``export_torchscript(model, input_shape, path)``; judge the file it saved."""
    from util.labs.lab4.torchscript import build, describe

    shape = tuple(spec["input_shape"])
    with tempfile.TemporaryDirectory(prefix="lab4-export-") as folder:
        path = Path(folder) / f"{spec['model']}.pt"
        fn(build(spec["model"]), shape, str(path))
        if not path.exists():
            raise FileNotFoundError(f"export_torchscript(model, {shape}, path) saved nothing at path")
        return describe(path, build(spec["model"]), shape)


def _analyze(part: str) -> Callable[[Callable, Mapping[str, Any]], Any]:
    """``run_case`` for a C++ task: the notebook's ``analyzer`` on the course's export of the model."""
    def run_case(analyzer: Callable, spec: Mapping[str, Any]) -> Any:
        from util.labs.lab4.torchscript import export

        return analyzer(export(spec["model"], spec["input_shape"]), spec["input_shape"], part)
    return run_case



RELEASES = (
    Release(1, "2026-11-22", "The first release: GoogLeNet exported to TorchScript, and its weight memory, "
            "activation memory and MACs computed in C++ against libtorch."),
    Release(2, "2026-11-23",
            "The helpers this notebook imports moved into the lab's own folder: util.cpp_analyzer is now "
            "util.labs.lab4.cpp_analyzer, util.torchscript is now util.labs.lab4.torchscript. Nothing graded "
            "changed, and the old imports keep working (they print a DeprecationWarning you may ignore).",
            marker="from util.labs.lab4.cpp_analyzer import Analyzer"),
    Release(3, "2026-11-23",
            "The hidden models now include tiny_tied: a weight two modules share (4.1 counts it once: "
            "named_parameters() lists it twice) and a transposed convolution (4.3 counts input elements x "
            "C_out/groups x kernel elements). The notebook states both with a hand count and a public check, and "
            "each of 4.1-4.3 has a hidden check on tiny_tied, whose points came from the task's other checks.",
            marker="A shared tensor counts once."),
    Release(4, "2026-11-26", "Task 4.2 asks a written question, Q1 (6 points, marked by hand): why the leaf walk, the "
            "top-level walk and lab 2's peak give three different activation memories; its points "
            "came from 4.2's exported answer.",
            marker="(written, 6 points of task 4.2, marked by hand)"),
)
"""The lab's changelog (``Lab.releases``); the C++ cases on ``tiny_tied`` came with release 3."""



def prepare() -> None:
    """Fill the TorchScript export cache with the notebook's GoogLeNet and the hidden models (the grader's
    side: it reads the grader-only cases)."""
    from util.labs import get_lab
    from util.labs.lab4.torchscript import export

    export("googlenet", (1, 3, 224, 224))
    specs = {(c.spec["model"], tuple(c.spec["input_shape"])) for t in get_lab(LAB.name).tasks if t.id != "4.0"
             for c in t.cases}
    for model, shape in sorted(specs):
        export(model, shape)


WRITTEN = {
    "4.2": (Written("4.Q1", "Your leaf walk finds about 31.5 MB of activations in GoogLeNet, the top-level "
                     "walk 13.3 MB, and lab 2's peak live memory of a network is smaller still. "
                     "Explain each difference: what the top-level walk misses, and why the memory "
                     "inference needs at its peak is below the sum that training keeps.",
                     6, words=(40, 250), since=4),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 4): their
points came out of their task's exported answer."""


LAB = Lab(
    name="lab4",
    prepare="util.labs.lab4.tasks:prepare",
    title="libtorch C++ model analysis",
    notebook="lab4_libtorch/lab4_libtorch.ipynb",
    packages=("torch", "torchvision", "numpy"),
    support=("cpp",),
    requires=("g++", "cmake", "make"),
    releases=RELEASES,
    cell_timeout=300,
    notebook_timeout=600,
    shared_sources=(*(f"solutions/{path}" for path in CPP),),
    tasks=(
        Task(
            id="4.0", title="TorchScript export", answer_points=6,
            answer="a dict {'parameters', 'leaf_modules', 'output_shape', 'matches_eager'} "
                   "(util.labs.lab4.torchscript.describe of the file you saved)",
            keys=("parameters", "leaf_modules", "output_shape", "matches_eager"),
            function="export_torchscript", run_case=_call_export,
            hidden_points=4,
            checks=CHECKS["4.0"],
        ),
        Task(
            id="4.1", title="Weight memory (C++)", answer_points=3,
            answer="the analyzer's 'weights' JSON: {'tensors': int, 'parameters': int, 'bytes': int}",
            keys=("tensors", "parameters", "bytes"),
            function="analyzer", run_case=_analyze("weights"), hidden_points=12,
            checks=CHECKS["4.1"],
        ),
        Task(
            id="4.2", title="Activation memory (C++)", answer_points=5, written=WRITTEN["4.2"],
            answer="the analyzer's 'activations' JSON: {'layers': [rows {'name','type','shape','element_size',"
                   "'bytes'}], 'total_bytes': int}",
            keys=("layers", "total_bytes"),
            function="analyzer", run_case=_analyze("activations"), hidden_points=24,
            checks=CHECKS["4.2"],
        ),
        Task(
            id="4.3", title="MACs (C++)", answer_points=16,
            answer="the analyzer's 'macs' JSON: {'nodes': [rows {'module','kind','macs'}], 'by_kind': {...}, "
                   "'total': int}",
            keys=("nodes", "by_kind", "total"),
            function="analyzer", run_case=_analyze("macs"), hidden_points=24,
            checks=CHECKS["4.3"],
        ),
    ),
)
