"""Lab 4's C++ for real (slow: each build compiles against libtorch, 10-60 s).

The solution's analyzer must agree with figures computed independently in Python (forward hooks,
``FlopCounterMode``), and a submission whose C++ does not compile must show the compiler's message
on every C++ check while keeping task 4.0's points. These run under ``-m notebook`` with the other
slow tests.
"""
from __future__ import annotations

import functools
import shutil

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from grader.author.build import SOLUTIONS
from grader.grade.submission import grade_submission
from util import export_cache
from util.labs import get_lab
from util.labs.lab4 import cpp_build
from util.labs.lab4.cpp_analyzer import Analyzer
from util.labs.lab4.torchscript import build, export

pytestmark = [pytest.mark.notebook,
              pytest.mark.skipif(cpp_build.missing_tools() != [], reason="needs cmake, make and g++")]
LAB = get_lab("lab4")


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """These tests export models in this process and read them seconds later from C++: in a cache of
    their own, since a grading run beside them deletes every export of the shared cache it did not
    record itself (grader/execute/caches.py), and did so between the two steps. (Not for a test that
    grades: its kernel runs as another user, who may not read this folder.)"""
    monkeypatch.setenv(export_cache.KINDS["torchscript"], str(tmp_path / "torchscript"))


@pytest.fixture(scope="module")
def analyzer(tmp_path_factory) -> Analyzer:
    """The solution's analyzer, built once in a copy of its folder."""
    folder = tmp_path_factory.mktemp("lab4") / "cpp"
    shutil.copytree(SOLUTIONS / "lab4_libtorch" / "cpp", folder, ignore=shutil.ignore_patterns("build"))
    result = Analyzer(folder)
    result.build()
    return result


def python_figures(name: str, shape: tuple[int, ...]) -> dict:
    """Weight bytes, leaf-call output rows and MACs, the Python way (not through TorchScript)."""
    model, rows = build(name), []

    def hook(module, inputs, output, name):
        rows.append({"name": name, "type": type(module).__name__, "shape": list(output.shape),
                     "element_size": output.element_size(), "bytes": output.numel() * output.element_size()})

    for module_name, module in model.named_modules():
        if module_name and not list(module.children()):
            module.register_forward_hook(functools.partial(hook, name=module_name))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.zeros(shape))
    return {"bytes": sum(p.numel() * p.element_size() for p in model.parameters()), "layers": rows,
            "macs": counter.get_total_flops() // 2}


def test_googlenet_figures_equal_lab_1(analyzer, private_cache):
    shape = (1, 3, 224, 224)
    path = export("googlenet", shape)
    assert analyzer(path, shape, "weights") == {"tensors": 173, "parameters": 6_624_904, "bytes": 26_499_616}
    activations = analyzer(path, shape, "activations")
    assert len(activations["layers"]) == 130 and activations["total_bytes"] == 31_491_360
    assert activations["layers"][0] == {"name": "conv1.conv", "type": "Conv2d", "shape": [1, 64, 112, 112],
                                        "element_size": 4, "bytes": 3_211_264}
    macs = analyzer(path, shape, "macs")
    assert macs["by_kind"] == {"aten::_convolution": 1_497_352_192, "aten::linear": 1_024_000}
    assert macs["total"] == 1_498_376_192 and len(macs["nodes"]) == 58


@pytest.mark.parametrize("name, shape", [("resnet18", (1, 3, 128, 128)), ("mobilenet_v2", (1, 3, 160, 160)),
                                         ("tiny_addmm", (2, 4, 16, 16))])
def test_hidden_models_agree_with_python(analyzer, private_cache, name, shape):
    expected, path = python_figures(name, shape), export(name, shape)
    assert analyzer(path, shape, "weights")["bytes"] == expected["bytes"]
    activations = analyzer(path, shape, "activations")
    assert activations["layers"] == expected["layers"]
    assert activations["total_bytes"] == sum(row["bytes"] for row in expected["layers"])
    assert analyzer(path, shape, "macs")["total"] == expected["macs"]


def test_a_compile_error_costs_the_cpp_tasks_only(tmp_path):
    submission = tmp_path / "alice"
    shutil.copytree(SOLUTIONS / "lab4_libtorch", submission, ignore=shutil.ignore_patterns("build", "outputs"))
    analysis = submission / "cpp" / "analysis.cpp"
    analysis.write_text(analysis.read_text().replace("report.tensors += 1;", "report.tensor += 1;", 1))
    result = grade_submission(submission / "lab4_libtorch.ipynb", LAB, tmp_path / "out")
    by_task = {task.task_id: task for task in result.tasks}
    assert by_task["4.0"].status == "passed" and result.score == by_task["4.0"].max_score == 10
    for task_id in ("4.1", "4.2", "4.3"):
        for check in by_task[task_id].checks:
            assert check.status == "error", (task_id, check.name, check.message)
            assert "CppBuildError: compiling the C++ failed" in check.message
            assert "analysis.cpp:" in check.message and "has no member named 'tensor'" in check.message
            assert str(submission) not in check.message and len(check.message.splitlines()) <= 30
    assert any("(set-up) raised CppBuildError" in note for note in result.notes)
