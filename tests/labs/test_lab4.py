"""Lab 4's machinery without libtorch builds: C++ markers, folder labs in the build, the support copy,
CMake error messages, the analyzer's JSON protocol, and the TorchScript export helper (all fast)."""
from __future__ import annotations

import json
import stat
import textwrap
from pathlib import Path

import pytest

from grader.author import build
from grader.author.markers import MarkerError, has_markers, remove_markers, stub_cpp
from grader.core import notebook
from grader.execute.scratch import copy_support
from util.contract import Mistake
from util.labs import get_lab
from util.labs.lab4 import cpp_build
from util.labs.lab4.cpp_analyzer import Analyzer, AnalyzerError, parse_output
from util.labs.lab4.cpp_build import BuildResult, CppBuildError, trim_compiler_output

LAB = get_lab("lab4")
TITLES = {t.id: t.title for t in LAB.tasks}
CPP = """#include <stdexcept>
// Task 4.1: Weight memory (C++)
int f(int x) {
  // ### BEGIN SOLUTION
  return 2 * x;
  // ### END SOLUTION
}
// Task 4.3: MACs (C++)
int g() {
    // ### BEGIN SOLUTION
    return 7;
    // ### END SOLUTION
}
"""


# ---------------------------------------------------------------- C++ markers

def test_cpp_regions_become_throwing_stubs_named_after_the_heading_above():
    out = stub_cpp(CPP, TITLES)
    assert "2 * x" not in out and "return 7" not in out and not has_markers(out)
    assert '  throw std::logic_error("Implement task 4.1: Weight memory (C++)");' in out
    assert '    throw std::logic_error("Implement task 4.3: MACs (C++)");' in out
    assert out.count("// YOUR CODE HERE") == 2


def test_remove_markers_keeps_the_cpp_solution():
    out = remove_markers(CPP, "analysis.cpp", "cpp")
    assert "return 2 * x;" in out and "return 7;" in out and not has_markers(out)


@pytest.mark.parametrize("source, message", [
    (CPP.replace("// Task 4.1: Weight memory (C++)", "// Task 4.1: Weights"), "declaration says 'Weight memory"),
    (CPP.replace("// Task 4.1: Weight memory (C++)", "// Task 900.9: Other"), "not a task of this lab"),
    (CPP.replace("// Task 4.1: Weight memory (C++)\n", ""), "no '// Task N.M: <title>' line above"),
    (CPP.replace("  // ### END SOLUTION\n}\n// Task 4.3", "}\n// Task 4.3", 1), "inside the region"),
    (CPP.replace("// ### BEGIN SOLUTION", "// ## BEGIN SOLUTION", 1), "END SOLUTION without a BEGIN"),
    (CPP.replace("  // ### BEGIN SOLUTION", "  // ###BEGIN  SOLUTION", 1), "malformed marker"),
])
def test_bad_cpp_markers_fail_with_the_line(source, message):
    with pytest.raises(MarkerError, match=message):
        stub_cpp(source, TITLES, "analysis.cpp")


def test_python_markers_are_not_cpp_markers():
    with pytest.raises(MarkerError, match="malformed marker"):
        remove_markers("// ### BEGIN SOLUTION\nx = 1\n// ### END SOLUTION", "cell", "python")


# ---------------------------------------------------------------- folder labs in the build

def test_the_student_folder_has_the_support_files_with_compiling_stubs():
    items = {item.path: item.text for item in build.outputs(LAB)}
    folder = build.LABS / "lab4_libtorch"
    assert set(p for p in items if p.is_relative_to(folder)) == {
        folder / "lab4_libtorch.ipynb", *(folder / "cpp" / n for n in
                                          ("CMakeLists.txt", "scaffold.h", "scaffold.cpp", "analysis.cpp"))}
    analysis = items[folder / "cpp" / "analysis.cpp"]
    assert not has_markers(analysis) and "report.bytes +=" not in analysis and "collect_leaves(child" not in analysis
    for task in LAB.tasks[1:]:
        assert f'throw std::logic_error("Implement task {task.id}: {task.title}");' in analysis
    solution = (build.SOLUTIONS / "lab4_libtorch" / "cpp" / "scaffold.cpp").read_text()
    assert items[folder / "cpp" / "scaffold.cpp"] == solution  # given code is copied as it is


def test_each_example_is_a_folder_with_its_mistake_applied_in_the_cpp():
    items = {item.path: item.text for item in build.outputs(LAB)}
    for mistake in build.mistakes(LAB):
        path = build.example_path(LAB, mistake)
        assert path == build.EXAMPLES / "lab4" / mistake.name / f"{mistake.name}.ipynb" and path in items
        analysis = items[path.parent / "cpp" / "analysis.cpp"]
        assert not has_markers(analysis)
        assert all(new in analysis for _, new in mistake.replacements)


def test_a_replacement_must_occur_once_across_notebook_and_support_files():
    nb = notebook.read(build.SOLUTIONS / LAB.notebook)
    support = build.support_files(LAB)
    with pytest.raises(ValueError, match="occurs 0 times in solutions/lab4_libtorch/lab4_libtorch.ipynb and its support"):
        build.example_copy(LAB, nb, Mistake("x", "typo", (("no such code", "y"),)), dict(support))
    with pytest.raises(ValueError, match=r"occurs [2-9] times"):  # in the notebook and in analysis.cpp
        build.example_copy(LAB, nb, Mistake("x", "twice", (("aten::_convolution", "y"),)), dict(support))


def test_check_reports_stray_files_in_generated_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "LABS", tmp_path / "labs")
    monkeypatch.setattr(build, "EXAMPLES", tmp_path / "examples")
    for item in build.outputs(LAB):
        item.path.parent.mkdir(parents=True, exist_ok=True)
        item.path.write_text(item.text, encoding="utf-8")
    assert build.check(LAB) == []
    (tmp_path / "labs" / "lab4_libtorch" / "cpp" / "build").mkdir()       # a student's build folder is fine
    (tmp_path / "labs" / "lab4_libtorch" / "cpp" / "build" / "x.o").write_text("")
    assert build.check(LAB) == []
    (tmp_path / "labs" / "lab4_libtorch" / "cpp" / "old.cpp").write_text("")
    (tmp_path / "examples" / "lab4" / "renamed_mistake").mkdir()
    problems = build.check(LAB)
    assert any("cpp/old.cpp is not generated" in p for p in problems)
    assert any("renamed_mistake is not declared" in p for p in problems)


def test_a_stale_support_file_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "LABS", tmp_path)
    problems = build.check(LAB)
    assert any("lab4_libtorch/cpp/analysis.cpp is missing" in p for p in problems)


# ---------------------------------------------------------------- the grader's copy

def test_copy_support_leaves_build_products_and_links_behind(tmp_path):
    source, scratch = tmp_path / "submission", tmp_path / "scratch"
    (source / "cpp" / "build").mkdir(parents=True)
    scratch.mkdir()
    (source / "cpp" / "analysis.cpp").write_text("int x;")
    (source / "cpp" / "build" / "CMakeCache.txt").write_text("CMAKE_HOME_DIRECTORY:INTERNAL=/home/alice/cpp")
    copy_support(LAB, source, scratch)
    assert (scratch / "cpp" / "analysis.cpp").read_text() == "int x;"
    assert not (scratch / "cpp" / "build").exists()

    linked, scratch2 = tmp_path / "linked", tmp_path / "scratch2"
    linked.mkdir(), scratch2.mkdir()
    (linked / "cpp").symlink_to(source / "cpp")
    copy_support(LAB, linked, scratch2)
    assert not (scratch2 / "cpp").exists()


# ---------------------------------------------------------------- CMake builds and their errors

BROKEN = textwrap.dedent("""\
    #include <string>
    int main() {
      std::string s = 1.5;
      return undefined_name;
    }
""")


def _project(folder: Path, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\nproject(t LANGUAGES CXX)\n"
                                           "add_executable(analyzer main.cpp)\n")
    (folder / "main.cpp").write_text(source)
    return folder


@pytest.mark.skipif(cpp_build.missing_tools() != [], reason="needs cmake, make and g++")
def test_a_compile_error_raises_the_trimmed_compiler_message(tmp_path):
    folder = _project(tmp_path / "cpp", BROKEN)
    with pytest.raises(CppBuildError) as caught:
        cpp_build.build(folder)
    message = str(caught.value)
    assert message.startswith("compiling the C++ failed:\n")
    assert "main.cpp:3:" in message and "undefined_name" in message and "error" in message
    assert str(tmp_path) not in message                 # paths are relative to the project
    assert "%]" not in message and "make[" not in message  # no progress lines


@pytest.mark.skipif(cpp_build.missing_tools() != [], reason="needs cmake, make and g++")
def test_a_good_build_is_incremental_and_a_moved_project_is_reconfigured(tmp_path):
    folder = _project(tmp_path / "cpp", "int main() { return 0; }\n")
    first = cpp_build.build(folder)
    assert first.compiled and first.binary == folder / "build" / "analyzer"
    assert not cpp_build.build(folder).compiled            # nothing changed: nothing compiled
    moved = tmp_path / "moved"
    (folder).rename(moved)                                  # the cache now names the old folder
    assert cpp_build.build(moved).compiled


def test_missing_tools_are_named_with_the_install_command(tmp_path, monkeypatch):
    folder = _project(tmp_path / "cpp", "int main() {}\n")
    monkeypatch.setattr(cpp_build.shutil, "which", lambda name: None if name == "cmake" else "/usr/bin/" + name)
    with pytest.raises(CppBuildError, match=r"cmake not found on PATH.*apt-get install cmake g\+\+"):
        cpp_build.build(folder)


def test_a_folder_without_cmakelists_says_to_submit_cpp_with_the_notebook(tmp_path):
    with pytest.raises(CppBuildError, match="submit the notebook together with its cpp/ folder"):
        cpp_build.build(tmp_path / "cpp")


def test_trim_keeps_the_errors_and_drops_the_noise(tmp_path):
    log = "\n".join([
        "[ 33%] Building CXX object CMakeFiles/analyzer.dir/analysis.cpp.o",
        f"{tmp_path}/cpp/analysis.cpp: In function 'int f()':",
        f"{tmp_path}/cpp/analysis.cpp:12:3: error: 'y' was not declared in this scope",
        *[f"{tmp_path}/cpp/analysis.cpp:{n}:1: note: something" for n in range(40)],
        "make[2]: *** [CMakeFiles/analyzer.dir/build.make:76] Error 1",
    ])
    out = trim_compiler_output(log, tmp_path / "cpp", max_lines=5)
    assert out.splitlines()[:2] == ["analysis.cpp: In function 'int f()':",
                                    "analysis.cpp:12:3: error: 'y' was not declared in this scope"]
    assert out.endswith("(37 more lines)") and "make[2]" not in out


# ---------------------------------------------------------------- the analyzer's protocol

def test_parse_output_reads_the_last_line_and_explains_bad_output():
    good = {"input_shape": [1], "results": {"weights": {"bytes": 4}}, "errors": {}}
    assert parse_output("debug: hello\n" + json.dumps(good) + "\n") == good
    with pytest.raises(AnalyzerError, match="not JSON.*std::cerr"):
        parse_output(json.dumps(good) + "\nleaf 3\n")
    with pytest.raises(AnalyzerError, match="printed nothing"):
        parse_output("\n")
    with pytest.raises(AnalyzerError, match="no 'results' and 'errors'"):
        parse_output('{"weights": 1}')


def _fake_analyzer(tmp_path: Path, script: str) -> Analyzer:
    """An Analyzer whose 'binary' is a shell script (no compiler needed)."""
    binary = tmp_path / "fake"
    binary.write_text("#!/bin/sh\n" + script)
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "cpp").mkdir()
    analyzer = Analyzer(tmp_path / "cpp")
    analyzer.build = lambda: BuildResult(binary, 0.0, False)
    analyzer._built = ("fingerprint", BuildResult(binary, 0.0, False))
    (tmp_path / "m.pt").write_text("")
    return analyzer


def test_each_part_returns_its_result_or_raises_its_own_error(tmp_path):
    line = json.dumps({"input_shape": [1, 3], "results": {"weights": {"bytes": 8}},
                       "errors": {"macs": "Implement task 4.3: MACs (C++)"}})
    analyzer = _fake_analyzer(tmp_path, f"echo 'debug'\necho '{line}'\n")
    assert analyzer(tmp_path / "m.pt", (1, 3), "weights") == {"bytes": 8}
    with pytest.raises(AnalyzerError, match="macs: Implement task 4.3: MACs"):
        analyzer(tmp_path / "m.pt", (1, 3), "macs")
    with pytest.raises(ValueError, match="unknown part"):
        analyzer(tmp_path / "m.pt", (1, 3), "flops")


def test_a_crashing_analyzer_names_the_signal(tmp_path):
    analyzer = _fake_analyzer(tmp_path, "echo 'segfault ahead' >&2\nkill -SEGV $$\n")
    with pytest.raises(AnalyzerError, match=r"crashed \(signal 11, SIGSEGV\) on m.pt:\nsegfault ahead"):
        analyzer(tmp_path / "m.pt", (1, 3), "weights")


def test_a_failed_build_is_remembered_until_a_source_changes(tmp_path, monkeypatch):
    import util.labs.lab4.cpp_analyzer as module

    calls = []

    def failing_build(source_dir, build_dir=None):
        calls.append(source_dir)
        raise CppBuildError("compiling the C++ failed:\nanalysis.cpp:3:1: error: boom")

    monkeypatch.setattr(module, "build", failing_build)
    (tmp_path / "cpp").mkdir()
    (tmp_path / "cpp" / "analysis.cpp").write_text("int x")
    analyzer = Analyzer(tmp_path / "cpp")
    for _ in range(3):
        with pytest.raises(CppBuildError, match="analysis.cpp:3:1: error: boom"):
            analyzer(tmp_path / "m.pt", (1,), "weights")
    assert len(calls) == 1
    (tmp_path / "cpp" / "analysis.cpp").write_text("int x;")
    with pytest.raises(CppBuildError):
        analyzer.build()
    assert len(calls) == 2


# ---------------------------------------------------------------- the TorchScript helper

def test_tiny_addmm_traces_to_the_nodes_the_hidden_case_is_for(tmp_path, monkeypatch):
    import torch

    from util.labs.lab4 import torchscript

    monkeypatch.setenv(torchscript.CACHE_ENV, str(tmp_path))
    path = torchscript.export("tiny_addmm", (2, 4, 16, 16))
    assert torchscript.export("tiny_addmm", [2, 4, 16, 16]) == path   # cached
    loaded = torch.jit.load(str(path))
    kinds = [node.kind() for node in loaded.graph.nodes()]
    assert "aten::addmm" in kinds and kinds.count("prim::CallMethod") == 3  # block, then act twice
    assert [n.kind() for n in loaded.block.depthwise.graph.nodes()].count("aten::_convolution") == 1
    described = torchscript.describe(path, torchscript.build("tiny_addmm"), (2, 4, 16, 16))
    # stem 144 + bn 16 + depthwise 80 + pointwise 144 + mix 192 + head 1930, then proj 60 + bias 6
    assert described == {"parameters": 144 + 16 + 80 + 144 + 192 + 1930 + 66,
                         "leaf_modules": 9, "output_shape": [2, 6], "matches_eager": True}


def test_describe_explains_a_file_saved_with_torch_save(tmp_path):
    import torch

    from util.labs.lab4 import torchscript

    model = torchscript.build("tiny_addmm")
    torch.save(model.state_dict(), tmp_path / "weights.pt")
    with pytest.raises(ValueError, match="not a TorchScript file.*torch.jit.trace"):
        torchscript.describe(tmp_path / "weights.pt", model, (2, 4, 16, 16))
