"""The check a cluster worker must pass: what is compared, and what an instructor is told."""
from __future__ import annotations

import json
from dataclasses import replace

from tinylab import registered

from grader.grade import worker_check

PACKAGES = ["torch", "distributed", "not-a-package-of-the-course"]


def test_the_pinned_packages_are_read_from_requirements():
    pinned = worker_check.pinned_packages()
    assert {"torch", "torchvision", "onnxruntime", "dask", "distributed"} <= set(pinned)
    assert "#" not in "".join(pinned)


def test_this_machine_passes_its_own_check_and_a_stale_reference_does_not(tmp_path):
    with registered(tmp_path / "references"):
        here = worker_check.facts(["lab900"], PACKAGES, sandbox=False)
        assert here.versions["not-a-package-of-the-course"] == "missing"
        assert {"grader/grade/cluster.py", "util/contract.py", "tests/tinylab_labs/lab900/tasks.py"} <= set(here.code)
        assert worker_check.check_here(here, ["lab900"], False) == []

        refs = tmp_path / "references" / "lab900.json"
        data = json.loads(refs.read_text())
        data["answers"]["900.2"] = 43
        refs.write_text(json.dumps(data))
        [problem] = worker_check.check_here(here, ["lab900"], False)
    assert problem.startswith("different references for lab900 (sha256 ")
    assert problem.endswith(f", the grader's {here.references['lab900'][:12]}: stale or edited)")


def test_every_difference_is_named():
    expected = worker_check.Facts(python="3.11", versions={"torch": "2.14.1", "distributed": "2026.8.0"},
                                  code={f"util/m{i}.py": "a" for i in range(6)}, references={"lab1": "b" * 64},
                                  sandbox=None)
    found = replace(expected, python="3.12", versions={"torch": "2.13.0"}, references={},
                    code={**expected.code, "util/m0.py": "c", "util/m1.py": "c", "util/m2.py": "c",
                          "util/m3.py": "c", "util/m4.py": "c", "util/extra.py": "c"},
                    sandbox=" (not installed)")
    problems = worker_check.problems(expected, found)
    assert problems == [
        "Python 3.12 (the grader: 3.11)",
        "other package versions: torch 2.13.0 (the grader: 2.14.1), distributed missing (the grader: 2026.8.0)",
        "no references for lab1",
        "different course code (another commit?): util/extra.py, util/m0.py, util/m1.py, util/m2.py and 2 more files",
        "no usable bubblewrap (not installed)"]
    assert worker_check.remedy(problems).endswith("(or grade with --no-sandbox, without isolation)")
    assert "bubblewrap" not in worker_check.remedy(problems[:4])
