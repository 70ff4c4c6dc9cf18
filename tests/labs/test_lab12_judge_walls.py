"""Lab 12.5's judge against ``train`` functions that read its rules and step around them, each beside a control.

The judge re-runs the student's ``train`` in a student process (``util.labs.lab12.judge_training``). Each attack
below scored before the judge measured what it now measures; each control plays the same wrong answer straight
and must lose its points, so what an attack gains is real. By kind of attack:

* **a phase outside the clock**: the training done while the function is unpickled, before the judge
  started its clock, so that ``train`` itself returns at once. Control: the same training inside ``train``. The
  harness now loads the function before it receives the images, so the unpickling finds nothing to train on (and
  would be timed if it did): it earns what the untrained control does.
* **a rule in shared state**: more than one thread, the process's CPU affinity widened for the
  training and put back before ``train`` returns (the judge used to look at the affinity at the end only).
  Control: the same work on one thread.
* **data the student's process can read**: a weak training run that adds the test images, read
  from the course's own data (``util.data.digits_split()``, at the path this process finds it by: with a symlinked
  virtual environment the sandbox binds the same files at two paths, and covering one left the other readable).
  Control: the same run on the training images it is given.
* **a shipped recording of the answer**: the weights of the DigitsCNN the course trains for lab 9 (its
  export cache), and weights trained in the notebook carried inside the pickle. Control: an untrained model.

Every case is judged through the grader's own judge process, in one call with an honest ``train``, as whoever
runs the tests (root in CI) and as an unprivileged grader.
"""
from __future__ import annotations

import os
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
from judged_attacks import job, notebook_namespace, verdicts

from grader.execute import confinement
from util.labs import get_lab

pytestmark = [pytest.mark.notebook,
              pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")]
SPEC = dict(get_lab("lab12").task("12.5").cases[0].spec)
NOTEBOOK = '''
import os, threading, time
import torch
import torch.nn.functional as F


def loop(model, x, y, epochs, seed):
    """The notebook's recipe: Adam 3e-3, batches of 64 in a seeded order."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(y), 64):
            batch = order[start:start + 64]
            loss = F.cross_entropy(model(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


def spin(seconds):
    """Work that takes ``seconds`` of this thread's CPU time (a training loop too slow for the budget)."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def honest(model, data, epochs, seed):
    return loop(model, data[0], data[1], epochs, seed)


def slow(model, data, epochs, seed):
    spin(SLOW)
    return loop(model, data[0], data[1], epochs, seed)


class TrainedWhenLoaded:
    """Unpickling this trains the model the grader is about to pass to train (found in the caller's frame)."""

    def __reduce__(self):
        return (trained_when_loaded, ())


def trained_when_loaded():
    import sys

    frame = sys._getframe(1)
    while frame is not None and not {"x", "y"} <= set(frame.f_locals):
        frame = frame.f_back
    if frame is not None and "model" in frame.f_locals:
        spin(SLOW)
        loop(frame.f_locals["model"], frame.f_locals["x"], frame.f_locals["y"], 4, 0)
    return "trained"


LOADED = TrainedWhenLoaded()


def instant(model, data, epochs, seed):
    LOADED
    return model.eval()


def one_thread(model, data, epochs, seed):
    spin(2 * SPREAD)
    return loop(model, data[0], data[1], epochs, seed)


def spread(model, data, epochs, seed):
    pinned = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(range(os.cpu_count())))
    threads = [threading.Thread(target=spin, args=(SPREAD,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    os.sched_setaffinity(0, pinned)
    return loop(model, data[0], data[1], epochs, seed)


def few(model, data, epochs, seed):
    return loop(model, data[0][:200], data[1][:200], 6, seed)


def few_and_test(model, data, epochs, seed):
    from util.data import digits_split

    split = digits_split()
    return loop(model, torch.cat([data[0][:200], split.x_test]), torch.cat([data[1][:200], split.y_test]), 6, seed)


def untrained(model, data, epochs, seed):
    return model.eval()


def course_model(model, data, epochs, seed):
    from util.labs.lab9.digits import trained_digits_cnn

    model.load_state_dict({name: value.float() for name, value in trained_digits_cnn().state_dict().items()})
    return model.eval()


def carried(model, data, epochs, seed):
    model.load_state_dict(CARRIED)
    return model.eval()
'''
SLOW, SPREAD = 3.0, 1.5
"""CPU seconds of the slow part; the budget of those cases is 2.5 s (that of the notebook's case, 10 s, for the rest)."""
ATTACKS = {  # name: (function, budget in seconds or None for the case's, the verdict it must get)
    "honest": ("honest", None, "pass"),
    "slow (control)": ("slow", 2.5, "timed"),
    "trained when unpickled": ("instant", 2.5, "accuracy"),  # loaded before the case's images exist: nothing to train
    "one thread (control)": ("one_thread", 2.5, "cpu"),
    "two threads, affinity put back": ("spread", 2.5, "cpu"),
    "200 images (control)": ("few", None, "accuracy"),
    "200 images and the test images": ("few_and_test", None, "unreadable"),
    "untrained (control)": ("untrained", None, "accuracy"),
    "the course's trained model": ("course_model", None, "unreadable"),
    "weights carried from the notebook": ("carried", None, "carried"),
}


@pytest.fixture(scope="module")
def course_cache(tmp_path_factory, monkeypatch_module):
    """An export cache holding the DigitsCNN lab 9 trains (as a grading machine that prepared lab 9 has), and
    its weights."""
    folder = tmp_path_factory.mktemp("onnx-cache")
    monkeypatch_module.setenv("COURSE_ONNX_CACHE", str(folder))
    from util.labs.lab9.digits import trained_digits_cnn

    state = {name: value.float().clone() for name, value in trained_digits_cnn().state_dict().items()}
    assert any("digits" in path.name for path in folder.iterdir())
    os.chmod(folder, 0o755)  # as a grading machine's caches are: any grader may read them
    return folder, state


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _jobs(folder: Path, carried_state: dict) -> list[dict]:
    namespace = notebook_namespace(NOTEBOOK, "lab12_attacks", SLOW=SLOW, SPREAD=SPREAD, CARRIED=carried_state)
    jobs = []
    for name, (function, budget, _) in ATTACKS.items():
        pickled = np.frombuffer(cloudpickle.dumps(namespace[function]), dtype=np.uint8)
        spec = {**SPEC, **({"seconds": budget} if budget else {})}
        jobs.append(job(folder, "lab12", "12.5", name.replace(" ", "_").replace(",", "").replace("'", ""),
                        {"train": pickled}, spec))
        jobs[-1]["spec"]["attacker"] = name
    return jobs


def _late(problems: list[str], budget: float) -> bool:
    """Whether ``problems`` say the run was over its time: its wall time, its CPU time, or no answer in 4x the budget
    (a loaded machine stretches the wall time of the slow runs past that)."""
    return any(p.startswith("train took ") and p.endswith(f"at most {budget:g} s") for p in problems) \
        or any(f"s of CPU time when the grader ran it (every thread and process of it, unpickling included); at most "
               f"{budget:g} s" in p for p in problems) \
        or problems == [f"run again by the grader, train did not return within {4 * budget:.0f} s (the budget is "
                        f"{budget:g} s)"]


def _assert_verdicts(found: dict[str, list[str]]) -> None:
    for name, (_, budget, verdict) in ATTACKS.items():
        problems = found[name]
        if verdict == "pass":
            assert problems == [], (name, problems)
        elif verdict == "timed":  # it trained (no accuracy problem), too slowly
            assert _late(problems, budget) and not any("test accuracy" in p for p in problems), (name, problems)
        elif verdict == "cpu":  # the CPU time of every thread counts: 2 x SPREAD s at least
            cpu = [p for p in problems if "s of CPU time when the grader ran it (every thread" in p]
            assert (cpu and float(cpu[0].split("used ")[1].split(" s")[0]) >= 2 * SPREAD) or _late(problems, budget), \
                (name, problems)
            assert not any("test accuracy" in p for p in problems), (name, problems)
        elif verdict == "accuracy":
            assert len(problems) == 1 and "test accuracy; at least 97% is needed" in problems[0], (name, problems)
        elif verdict == "unreadable":
            assert len(problems) == 1 and problems[0].startswith("run again by the grader, train raised ") \
                and "Permission denied" in problems[0], (name, problems)
        elif verdict == "carried":
            assert len(problems) == 1 and "bytes; the grader runs it from at most 16,384" in problems[0], (name, problems)


def test_each_attack_on_the_training_judge_earns_what_its_control_does(tmp_path, course_cache):
    folder, state = course_cache
    _assert_verdicts(verdicts(_jobs(tmp_path, state), tmp_path, "lab12"))


@pytest.mark.slow  # as an unprivileged grader: the same judge; the sandbox's unprivileged path runs every time in tests/test_walls.py, tests/test_unprivileged.py and labs 7 and 13's attacks
def test_the_same_as_an_unprivileged_grader(tmp_path, course_cache):
    folder, state = course_cache
    _assert_verdicts(verdicts(_jobs(tmp_path, state), tmp_path, "lab12", as_user=True,
                              env={"COURSE_ONNX_CACHE": str(folder)}, needed=(folder,)))


def test_the_judge_withholds_the_digits_and_every_cached_model_trained_on_them(course_cache):
    """What the judge withholds, by name: the images, and every cached model whose name says it was trained on them
    (read when the student process starts)."""
    from util.data import WITHHELD
    from util.labs.lab12.judge_training import WITHHELD as JUDGE_WITHHOLDS

    folder, _ = course_cache
    assert JUDGE_WITHHOLDS == ("digits", "digits_models")
    models = WITHHELD["digits_models"]()
    assert models and all(path.parent == folder and "digits" in path.name for path in models)
    assert {path.name for path in WITHHELD["digits"]()} == {"digits.csv.gz", "digits.rst"}


def test_the_harness_check_sees_what_is_readable_and_the_sandbox_covers_every_path_it_is_bound_at(tmp_path):
    """``util.data.readable`` (what a harness reports before any student code runs) finds the digits here, where
    nothing withholds them; and a file under a folder bound both where it is named (a symlink) and where it lies is
    covered at both (``grader.execute.sandbox._aliases``): covering the resolved file alone left the other path
    readable."""
    from pathlib import Path

    from grader.execute.sandbox import _aliases
    from util.data import WITHHELD, readable

    assert sorted(readable(("digits",))) == sorted(str(path) for path in WITHHELD["digits"]())
    real = tmp_path / "real" / "lib"
    real.mkdir(parents=True)
    (real / "data.csv").write_text("1,2\n")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    shown = [tmp_path / "link", (tmp_path / "link").resolve(), Path("/usr")]
    assert _aliases(tmp_path / "link" / "lib" / "data.csv", shown) == [
        (real / "data.csv").resolve(), tmp_path / "link" / "lib" / "data.csv"]
