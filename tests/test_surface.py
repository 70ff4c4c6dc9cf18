"""Every name a released handout imports keeps resolving: each lab's recorded surface imports, old names
included (the same objects, with a warning naming the new place), and covers what every handout, today's
and each earlier one in the repository's history, uses."""
from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from grader import REPO
from grader.author import surface
from util import labs
from util.labs import LABS

LAB_NAMES = list(LABS)


def _resolve(name: str):
    """The object ``"module:attr.attr"`` (or ``"module"``) names."""
    module, _, attributes = name.partition(":")
    value = importlib.import_module(module)
    for attribute in filter(None, attributes.split(".")):
        value = getattr(value, attribute)
    return value


@pytest.mark.parametrize("lab_name", LAB_NAMES)
def test_every_recorded_name_imports(lab_name):
    names = labs.surface(LABS[lab_name])
    assert len(names) >= 4 and {"util:setup", "util:submit", "util:check", "util:progress"} <= set(names)
    for name in names:
        assert _resolve(name) is not None, name


def _fresh(module_name: str) -> None:
    """Forget an old module name, so that importing it goes through the finder again."""
    sys.modules.pop(module_name, None)
    parent, _, child = module_name.rpartition(".")
    if parent in sys.modules and getattr(sys.modules[parent], child, None) is not None:
        delattr(sys.modules[parent], child)


@pytest.mark.parametrize("old, new", sorted(labs.MOVED.items()))
def test_an_old_place_gives_the_object_at_the_new_one_with_a_warning_naming_it(old, new):
    if ":" not in old:
        _fresh(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if ":" in old:
            value = _resolve(old)  # getattr on the module that lost it
        else:
            __import__(old)  # as an import statement does
            value = sys.modules[old]
    assert value is _resolve(new)
    shown = new.replace(":", ".")
    [warning] = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert f"has moved to {shown};" in str(warning.message)
    assert warning.filename == __file__  # the line that imported the old name, as Jupyter shows it


def test_the_known_moves_are_recorded():
    assert {"util.cpp_analyzer", "util.torchscript", "util.onnx_models:gemm_chain_graph",
            "util.onnx_models:perturbed"} <= set(labs.MOVED)


def test_an_import_statement_of_an_old_name_works_in_a_fresh_interpreter_and_warns_at_its_line():
    code = ("import warnings\nwarnings.simplefilter('always')\n"
            "from util.cpp_analyzer import Analyzer\n"
            "from util.onnx_models import gemm_chain_graph\n"
            "import util.labs.lab4.cpp_analyzer as new, util.labs.lab3.graphs as graphs\n"
            "assert Analyzer is new.Analyzer and gemm_chain_graph is graphs.gemm_chain_graph\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert re.findall(r"<string>:(\d): DeprecationWarning: (\S+) has moved", done.stderr) == [
        ("3", "util.cpp_analyzer"), ("4", "util.onnx_models.gemm_chain_graph")]


def test_an_unrecorded_move_breaks_the_old_import(monkeypatch):
    """What keeps an old name working is its record: without it the import fails as a student's would."""
    _fresh("util.cpp_analyzer")
    monkeypatch.setattr(labs, "MOVED", {k: v for k, v in labs.MOVED.items() if k != "util.cpp_analyzer"})
    with pytest.raises(ModuleNotFoundError, match="util.cpp_analyzer"):
        importlib.import_module("util.cpp_analyzer")
    monkeypatch.setattr(labs, "MOVED", {})
    with pytest.raises(ImportError, match="gemm_chain_graph"):
        exec("from util.onnx_models import gemm_chain_graph", {})


def test_names_are_read_from_code_text_and_markdown():
    nb = {"cells": [
        {"cell_type": "code", "source": ["%matplotlib inline\n", "from util.x import a, b\n", "import util.y\n",
                                         "util.z.f(1)\n", "import importlib.util\n"]},
        {"cell_type": "markdown", "source": "Call `util.netron_view.show(path)`; not importlib.util.find_spec."},
        {"cell_type": "code", "source": "this cell does not parse: from util.broken import"},
    ]}
    assert surface.notebook_names(nb) == {"util.x:a", "util.x:b", "util.y", "util.z.f", "util.z",
                                          "util.netron_view.show", "util.broken"}


def _handout_names(nb_path: Path) -> set[str]:
    found = surface.notebook_names(json.loads(nb_path.read_text(encoding="utf-8")))
    for path in nb_path.parent.rglob("*") if nb_path.parent != REPO / "labs" else ():
        if path.is_file() and path.suffix != ".ipynb" and "build" not in path.parts:
            found |= surface.text_names(path.read_text(encoding="utf-8", errors="replace"))
    return found


@pytest.mark.parametrize("lab_name", LAB_NAMES)
def test_todays_handout_uses_only_recorded_names(lab_name):
    lab = LABS[lab_name]
    names = _handout_names(REPO / "labs" / lab.notebook)
    assert names and surface.unrecorded(lab, names) == []


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True, timeout=60).stdout


def _history() -> list[tuple[str, str, set[str]]]:
    """(commit, lab, names) for every version of every handout file on this branch's mainline (its first parents:
    what was released; the intermediate commits of a branch merged into it never reached students)."""
    try:
        if _git("rev-parse", "--is-shallow-repository").strip() == "true":
            pytest.skip("a shallow clone holds no earlier handouts")
        commits = _git("log", "--first-parent", "--format=%H", "HEAD", "--", "labs/").split()  # the mainline: what was released
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no earlier handouts to read")
    found = []
    for commit in commits:
        for path in _git("ls-tree", "-r", "--name-only", commit, "--", "labs/").split():
            match = re.match(r"labs/(lab\d+)", path)
            if match and match.group(1) in LABS:
                text = _git("show", f"{commit}:{path}")
                names = surface.notebook_names(json.loads(text)) if path.endswith(".ipynb") else surface.text_names(text)
                found.append((commit[:7], match.group(1), names))
    return found


def test_every_earlier_handout_uses_only_recorded_names():
    history = _history()
    assert len({commit for commit, _, _ in history}) >= 20  # the handouts released so far
    missing = sorted({f"{lab} ({commit}): {name}" for commit, lab, names in history
                      for name in surface.unrecorded(LABS[lab], names)})
    assert missing == []
    old = {name for _, lab, names in history if lab in ("lab3", "lab4") for name in names}
    assert {"util.cpp_analyzer:Analyzer", "util.torchscript:export", "util.onnx_models:perturbed"} <= old


def test_the_build_check_names_a_handout_import_its_lab_has_not_recorded():
    from grader.author.build import LABS as HANDOUTS
    from grader.author.build import BuildOutput, unrecorded_names

    lab = LABS["lab1"]
    nb = {"cells": [{"cell_type": "code", "source": "from util.models import build_model, brand_new_helper"}]}
    [problem] = unrecorded_names(lab, [BuildOutput(HANDOUTS / lab.notebook, json.dumps(nb))])
    assert problem.startswith(f"labs/{lab.notebook} uses util.models:brand_new_helper, which util/labs/lab1/surface.py")
