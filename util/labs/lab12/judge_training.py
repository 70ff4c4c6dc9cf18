"""Task 12.5's judge: the grader trains DigitsCNN again with the student's ``train`` and decides itself.

The hidden case saved the student's ``train`` (pickled by value with cloudpickle: the function and what it
carries from the notebook, at most :data:`MAX_CARRIED` bytes). Here, in the grader's judge process,
:func:`check_training` asks the grader for a student process pinned to one CPU
(:mod:`util.labs.lab12.train_harness`), in which the digits and every model the course trained on them cannot
be read (``withhold``). The harness warms PyTorch up and says it is ready before any student code is there;
then the judge notes the process's CPU time as the grader measures it (every process and thread it ran,
exited ones included), starts its clock, and sends the function and the training images. Everything the
student's code can run in, unpickling included, happens before the reply with the weights, so inside both
measurements: the wall time from this side of the socket, and the CPU time the whole process tree used. Both
must be within the case's budget, and the CPU time no more than the wall time (one thread on one core: a thread
or process that left the core and came back before the end is caught by what it used). What the kernel could
have done beforehand reaches this process only inside the pickle, whose size is bounded. The returned weights
are loaded into a DigitsCNN built here and evaluated on the test images here, which the student's process could
not read: nothing it says is a verdict.
"""
from __future__ import annotations

import os
import time
from typing import Any, Mapping

from util.contract import Tolerance
from util.labs.lab12.train_harness import MAX_CARRIED as _MAX_CARRIED

START_SECONDS = 60.0
"""How long the student process may take to start and warm up (imports included; about 9 s measured on 2
cores at load 8). No student code runs in that time."""
WAIT_FACTOR = 4.0
"""The judge waits up to this many times the case's time budget for the weights, to say how long it took."""
MAX_CARRIED = _MAX_CARRIED
"""Bytes the pickled ``train`` may have (``train_harness.MAX_CARRIED``, which loads it bounded)."""
CPU_SLACK = (1.15, 0.25)
"""CPU time allowed for the wall time ``t``: ``1.15 t + 0.25`` s (one thread; the grader reads CPU time in clock
ticks)."""
WITHHELD = ("digits", "digits_models")
"""What the student process cannot read (:data:`util.data.WITHHELD`): the images the judge evaluates on, and the
course's models trained on them."""


def model_seed(spec: Mapping[str, Any]) -> int:
    """The seed of the fresh DigitsCNN the student's ``train`` trains (and is passed): drawn from the grading secret
    for this case (:mod:`util.judging.secret`), never the spec's, so no model trained beforehand starts from it (the
    solution reaches 98.3 % to 99.4 % from any: seeds 1, 2, 3, 12345 and 987654321 measured)."""
    import json

    from util.judging import secret

    return secret.seed("lab12", "12.5", "model", json.dumps(dict(spec), sort_keys=True), bits=31)


def trained_state(spec: Mapping[str, Any], pickled: bytes, x, y) -> tuple[dict | None, dict, str]:
    """Run the student's ``train`` in a student process: ``(state_dict as numpy arrays, measured, problem)``;
    ``measured`` holds ``seconds`` (wall, from the judge's side) and ``cpu_seconds`` (the student process's
    tree, by the grader) of the whole run from the moment the function was sent; ``state`` is ``None`` and
    ``problem`` says why when it could not be had."""
    import numpy as np

    from util.labs.lab12.train_harness import DTYPES
    from util.student_process import ChannelError, StudentProcess

    budget = float(spec["seconds"])
    measured = {"seconds": 0.0, "cpu_seconds": 0.0}
    if len(pickled) > MAX_CARRIED:
        return None, measured, (f"train, pickled with what it reads from the notebook, is {len(pickled):,} bytes; the "
                                f"grader runs it from at most {MAX_CARRIED:,}: train the model it is given with the data "
                                "it is given, and keep large values (a trained model, a data set) out of it")
    cpu = max(os.sched_getaffinity(0))
    try:
        with StudentProcess.start("util.labs.lab12.train_harness:serve", cpu=cpu, max_data=8 << 20,
                                  seconds=START_SECONDS + WAIT_FACTOR * budget + 30, withhold=WITHHELD) as student:
            reply, _ = student.receive(timeout=START_SECONDS)
            if reply.get("ready") is not True:
                return None, measured, "the grader's process for train could not start"
            if reply.get("readable"):
                return None, measured, ("the grader could not withhold the digits from its process for train on this "
                                        f"machine ({str(reply['readable'])[:200]} readable), so it does not grade the "
                                        "run: tell your instructor")
            before = student.stats()["cpu_seconds"]
            start = time.perf_counter()
            student.send({"function": True}, data=pickled)
            student.send({"data": {"rows": int(x.shape[0]), "seed": model_seed(spec), "epochs": int(spec["epochs"])}},
                         data=x.numpy().astype(np.float32).tobytes() + y.numpy().astype(np.int64).tobytes())
            try:
                reply, data = student.receive(timeout=WAIT_FACTOR * budget)
            except ChannelError as exc:
                if "time allowed" in str(exc):
                    return None, measured, (f"run again by the grader, train did not return within "
                                            f"{WAIT_FACTOR * budget:.0f} s (the budget is {budget:g} s)")
                raise
            measured["seconds"] = time.perf_counter() - start
            after = student.stats()
            measured["cpu_seconds"] = float(after["cpu_seconds"]) - float(before)
            cpus = after.get("cpus")
    except ChannelError as exc:
        return None, measured, f"the grader could not run train again ({exc})"
    if "done" not in reply:
        return None, measured, f"run again by the grader, train raised {str(reply.get('raised'))[:250]}"
    if cpus != [cpu]:
        return None, measured, "train changed its CPU affinity: the grader times it on one core, with one thread"
    listed, state, offset = reply["done"], {}, 0
    try:
        for name, dtype, shape in listed:
            if dtype not in DTYPES or not isinstance(name, str) or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise ValueError(name)
            size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            state[name] = np.frombuffer(data[offset:offset + size], dtype=dtype).reshape(shape)
            offset += size
    except (TypeError, ValueError):
        return None, measured, "the weights train returned could not be read"
    return state, measured, ""


def check_training(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 12.5: DigitsCNN trained again by the grader with the saved ``train`` (:func:`trained_state`): test
    accuracy at least ``spec["min_accuracy"]`` (evaluated here, on images the student's process could not read)
    within ``spec["seconds"]`` of wall time and of CPU time (the whole process tree), using no more CPU time than
    wall time (one thread)."""
    import torch

    from util.artifacts import read_saved_arrays
    from util.data import digits_split
    from util.models import build_model

    arrays, problems = read_saved_arrays(data, expected=["train"])
    if problems:
        return problems
    split = digits_split()
    state, measured, problem = trained_state(spec, arrays["train"].tobytes(), split.x_train, split.y_train)
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
        problems.append(f"trained again by the grader (a fresh DigitsCNN from a seed of the grader's, {spec['epochs']} "
                        "epochs), the "
                        f"model reaches {accuracy:.1%} test accuracy; at least {spec['min_accuracy']:.0%} is needed")
    seconds, cpu = measured["seconds"], measured["cpu_seconds"]
    if seconds > spec["seconds"]:
        problems.append(f"train took {seconds:.1f} s when the grader ran it (one thread, warm; unpickling it and "
                        f"building the model included); at most {spec['seconds']:g} s")
    if cpu > spec["seconds"]:
        problems.append(f"train used {cpu:.1f} s of CPU time when the grader ran it (every thread and process of it, "
                        f"unpickling included); at most {spec['seconds']:g} s")
    if cpu > CPU_SLACK[0] * seconds + CPU_SLACK[1]:
        problems.append(f"train used {cpu:.1f} s of CPU time in {seconds:.1f} s when the grader ran it: it is timed with "
                        "one thread on one core, and more than one ran")
    return problems
