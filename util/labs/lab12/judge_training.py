"""Task 12.5's judge: the grader trains DigitsCNN again with the student's ``train`` and decides itself.

The hidden case saved the student's ``train`` (pickled by value with cloudpickle). Here, in the
grader's judge process, :func:`check_training` asks the grader for a student process pinned to one
CPU (:mod:`util.labs.lab12.train_harness`), hands it the function and the training images of
:func:`util.data.digits_split`, lets it build a fresh DigitsCNN from the case's seed and warm PyTorch
up, then times ``train(model, (x, y), epochs, seed)`` from this side of the socket (wall time, from
the request to the reply with the weights). The returned weights are loaded into a DigitsCNN built
here and evaluated on the test images here: nothing the student's process says is a verdict.
"""
from __future__ import annotations

import os
import time
from typing import Any, Mapping

from util.contract import Tolerance

START_SECONDS = 60.0
"""How long the student process may take to start, unpickle and warm up (imports included; about 9 s
measured on 2 cores at load 8)."""
WAIT_FACTOR = 4.0
"""The judge waits up to this many times the case's time budget for the weights, to say how long it took."""


def trained_state(spec: Mapping[str, Any], pickled: bytes, x, y) -> tuple[dict | None, float, str]:
    """Run the student's ``train`` in a student process: ``(state_dict as numpy arrays, seconds, problem)``;
    ``state`` is ``None`` and ``problem`` says why when it could not be had."""
    import numpy as np

    from util.labs.lab12.train_harness import DTYPES
    from util.student_process import ChannelError, StudentProcess

    budget = float(spec["seconds"])
    cpu = max(os.sched_getaffinity(0))
    try:
        with StudentProcess.start("util.labs.lab12.train_harness:serve", cpu=cpu, max_data=8 << 20,
                                  seconds=START_SECONDS + WAIT_FACTOR * budget + 30) as student:
            student.send({"function": True}, data=pickled)
            student.send({"data": {"rows": int(x.shape[0]), "seed": int(spec["seed"]), "epochs": int(spec["epochs"])}},
                         data=x.numpy().astype(np.float32).tobytes() + y.numpy().astype(np.int64).tobytes())
            reply, _ = student.receive(timeout=START_SECONDS)
            if reply.get("ready") is not True:
                return None, 0.0, f"run again by the grader, train could not start: {str(reply.get('raised'))[:250]}"
            start = time.perf_counter()
            student.send({"go": True})
            try:
                reply, data = student.receive(timeout=WAIT_FACTOR * budget)
            except ChannelError as exc:
                if "time allowed" in str(exc):
                    return None, 0.0, (f"run again by the grader, train did not return within {WAIT_FACTOR * budget:.0f} s "
                                       f"(the budget is {budget:g} s)")
                raise
            seconds = time.perf_counter() - start
            cpus = student.stats().get("cpus")
    except ChannelError as exc:
        return None, 0.0, f"the grader could not run train again ({exc})"
    if "done" not in reply:
        return None, seconds, f"run again by the grader, train raised {str(reply.get('raised'))[:250]}"
    if cpus != [cpu]:
        return None, seconds, "train changed its CPU affinity: the grader times it on one core, with one thread"
    listed, state, offset = reply["done"], {}, 0
    try:
        for name, dtype, shape in listed:
            if dtype not in DTYPES or not isinstance(name, str) or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise ValueError(name)
            size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            state[name] = np.frombuffer(data[offset:offset + size], dtype=dtype).reshape(shape)
            offset += size
    except (TypeError, ValueError):
        return None, seconds, "the weights train returned could not be read"
    return state, seconds, ""


def check_training(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 12.5: DigitsCNN trained again by the grader with the saved ``train``: test accuracy at least
    ``spec["min_accuracy"]`` (evaluated here) within ``spec["seconds"]`` of wall time, one thread."""
    import torch

    from util.artifacts import read_saved_arrays
    from util.data import digits_split
    from util.models import build_model

    arrays, problems = read_saved_arrays(data, expected=["train"])
    if problems:
        return problems
    split = digits_split()
    state, seconds, problem = trained_state(spec, arrays["train"].tobytes(), split.x_train, split.y_train)
    if state is None:
        return [problem]
    model = build_model("digits_cnn")
    expected = {name: (str(t.dtype).removeprefix("torch."), list(t.shape)) for name, t in model.state_dict().items()}
    found = {name: (str(a.dtype), list(a.shape)) for name, a in state.items()}
    if found != expected:
        return ["the model train returned does not hold DigitsCNN's weights (names, dtypes and shapes of its state_dict "
                "differ): train the model it is given and return it"]
    model.load_state_dict({name: torch.from_numpy(array.copy()) for name, array in state.items()})
    model.eval()
    with torch.no_grad():
        logits = model(split.x_test)
    if not torch.isfinite(logits).all():
        return ["the trained model's outputs hold NaN or infinity"]
    accuracy = float((logits.argmax(1) == split.y_test).float().mean())
    problems = []
    if not accuracy >= spec["min_accuracy"]:
        problems.append(f"trained again by the grader (a fresh DigitsCNN, seed {spec['seed']}, {spec['epochs']} epochs), the "
                        f"model reaches {accuracy:.1%} test accuracy; at least {spec['min_accuracy']:.0%} is needed")
    if seconds > spec["seconds"]:
        problems.append(f"train took {seconds:.1f} s when the grader ran it (one thread, warm); at most "
                        f"{spec['seconds']:g} s")
    return problems
