"""Lab 12.5's judge against ``train`` functions that are wrong, slow, crash, leave their core or forge.

The judge (``util.labs.lab12.judge_training``) runs the student's ``train`` in a student process the
grader starts (this test process plays the judge, ``grader.judge.isolated.serving``), times it from
its side and evaluates the returned weights itself. Each case starts one student process (PyTorch's
import and a warm-up step: a few seconds); the solution's own ``train`` is judged when
``tests/test_labs.py`` grades the solution notebook.
"""
from __future__ import annotations

import io

import cloudpickle
import numpy as np
import pytest

from grader.judge.isolated import serving
from util.contract import Tolerance
from util.labs import get_lab
from util.labs.lab12 import judge_training

SPEC = dict(get_lab("lab12").task("12.5").cases[0].spec)


@pytest.fixture(autouse=True, scope="module")
def judge_here():
    """This process is the judge: its calls get student processes from the grader's service."""
    with serving():
        yield


def saved(train) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, train=np.frombuffer(cloudpickle.dumps(train), dtype=np.uint8))
    return buffer.getvalue()


def verdict(train, **spec) -> list[str]:
    return judge_training.check_training({**SPEC, **spec}, saved(train), Tolerance())


def test_an_untrained_model_fails_and_a_slow_train_is_timed():
    def idle(model, data, epochs, seed):
        import time

        time.sleep(1.5)
        return model.eval()

    problems = verdict(idle, seconds=1)
    assert len(problems) == 2 and "the model reaches" in problems[0] and "at least 97% is needed" in problems[0]
    assert problems[1].startswith("train took 1.") and problems[1].endswith("at most 1 s")


def test_a_train_that_raises_is_reported():
    def stub(model, data, epochs, seed):
        raise NotImplementedError("Implement task 12.5: Train on the digits")

    assert verdict(stub) == ["run again by the grader, train raised NotImplementedError: Implement task 12.5: Train on "
                             "the digits"]


def test_a_forged_reply_on_the_judges_socket_earns_only_what_its_weights_do():
    """The student's code can find the harness's channel and answer first, with weights of its choice
    and a claim of its own: the judge still evaluates those weights itself."""
    def forger(model, data, epochs, seed):
        import gc

        from util.student_process import Channel

        channel = next(o for o in gc.get_objects() if isinstance(o, Channel))
        state = model.state_dict()
        listed = [[name, str(t.dtype).removeprefix("torch."), list(t.shape)] for name, t in state.items()]
        channel.send({"done": listed, "accuracy": 1.0, "passed": True},
                     data=b"".join(t.numpy().tobytes() for t in state.values()))
        return model

    problems = verdict(forger)
    assert len(problems) == 1 and "the model reaches" in problems[0]


def test_leaving_the_core_or_the_process_is_refused():
    def unpin(model, data, epochs, seed):
        import os

        os.sched_setaffinity(0, set(range(os.cpu_count())))
        return model.eval()

    def leave(model, data, epochs, seed):
        import os

        os._exit(3)

    if len(__import__("os").sched_getaffinity(0)) > 1:
        assert verdict(unpin) == ["train changed its CPU affinity: the grader times it on one core, with one thread"]
    [problem] = verdict(leave)
    assert problem.startswith("the grader could not run train again (")
