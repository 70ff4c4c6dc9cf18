"""Task 16.7's judge: residual networks pruned by the student's ``prune_residual``, in a student process.

For each network of a case (:func:`networks`) the judge builds its :class:`~util.labs.lab16.residual.ResidualNet`
with weights and BatchNorm statistics drawn from the grading secret (:func:`weights_seed`, :mod:`util.judging.secret`: never from the spec
alone, so no network can be known before grading), and for each of its calls ``(conv, keep)`` sends the
network's architecture and weights, ``conv`` and ``keep`` to the student process (``residual_harness.py``), which
answers with the group the function named and every tensor of the network it returned. Then, with its own
computation:

* **the group**: exactly :func:`reference_groups`' group of ``conv`` (the convolutions
  whose outputs are added together), as a set of names;
* **the shapes**: the returned tensors are rebuilt into the course's ``ResidualNet`` whose widths are read from the
  convolutions' weights (:func:`~util.labs.lab16.residual.config_from_state`), each name and shape exactly that
  network's; every width is the original's but the group's, which is ``keep``;
* **parameters and MACs**: counted here on the rebuilt network (lab 1's convention), against the grader's own
  pruned architecture's (never a count or a method of the student's);
* **outputs**: the rebuilt network (the grader's forward, never the student's) on random images drawn from the
  secret, against the **masked** network the grader builds from the same choice
  (:func:`~util.labs.lab16.residual.masked_residual`: the group's channels of largest summed L1 norm kept, the
  others' filters and BatchNorm scale and shift zeroed), relative difference at most :data:`OUTPUT_RTOL`.

The bytes that come back are untrusted: arrays read without pickle, names, shapes and dtypes checked before use.
The **timed case** (``"chain"`` and ``"timed"`` in the spec) cuts every group of a larger network to a quarter of
its width, one call after another (each on the network the call before returned, rebuilt by the grader), then times the
last network the function returned, in the student process, the way lab 8 times kernels: the judge sends a batch of
images drawn from the secret and measures, from its own side of the socket, how long ``calls`` forward passes take
there (the outputs checked against the rebuilt network's); the dense network and the same network with unstructured
zeros at the cut one's parameter count (:func:`~util.labs.lab16.residual.unstructured_like`: one global magnitude
ranking, every shape unchanged) are timed in the judge's process, on the same CPU, while every process of the student's is stopped. Best
of ``rounds`` rounds of ``calls`` calls, each call timed on its own (a first round warms every network up and is not
counted), and the CPU time of them all (the student process's counted by the grader from outside: on a loaded
machine waiting for a CPU adds wall time, not CPU time); the cut network must run at least ``min_speedup`` times as
fast as the dense one, by either. A time the student's code reports is never used.

**One student process for the lab's cases** (:mod:`util.labs.lab16.judge_kept`): a case starts its student process pinned
to one CPU (the one the timed case measures on) and, when it passes, leaves it running for the next case of this
grading (16.7's and 16.9's), which sends its own inputs to it as a fresh process would have received them: a
function is loaded before any input of its task, and every call brings all the call needs. A case that fails, or
whose process answered out of turn, ends its process; the next case starts a fresh one.

Feedback names the convolution asked about and what differs, never the grader's figures.
"""
from __future__ import annotations

import io
import json
import os
import time
from typing import Any, Mapping, Sequence

from util.contract import Tolerance
from util.labs.lab16 import judge_kept as kept

OUTPUT_RTOL = 1e-4
"""Outputs against the masked network's, relative to their largest magnitude (float32 sums in another order)."""
START_SECONDS = 60.0
"""How long the student process may take to start and load the function."""
CALL_SECONDS = 30.0
"""How long one call of ``prune_residual`` may take (tracing and cutting a small network: well under a second)."""
ATTEMPTS = 2
"""How many times the timed case is measured before a network is found too slow (a burst of load on a shared
machine can slow every call of one measurement; the course's network passes a second one)."""


def weights_seed(spec: Mapping[str, Any], index: int = 0) -> int:
    """The seed of a case's network ``index`` (see :func:`networks`), drawn from the grading secret for this case."""
    from util.judging import secret

    return secret.seed("lab16", "16.7 weights", json.dumps(dict(spec), sort_keys=True), index, bits=62)


def networks(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A case's networks, each ``{"arch", and "prunes", "every" or "chain"}``: its ``networks``, or the case itself."""
    return list(spec["networks"]) if "networks" in spec else [spec]


def calls(spec: Mapping[str, Any]) -> list[tuple[str, int]]:
    """A case's ``(conv, keep)`` calls: its ``prunes``; (``"every"``) every convolution cut to half its width; or
    (``"chain": fraction``) the first convolution of every group cut to that fraction of its width, each call on the
    network the one before returned."""
    from util.labs.lab16.residual import ResidualNet, convolutions

    if spec.get("chain"):
        net = ResidualNet(**spec["arch"])
        return [(group[0], max(1, round(float(spec["chain"]) * net.get_submodule(group[0]).out_channels)))
                for group in reference_groups(net.config())]
    if spec.get("every"):
        net = ResidualNet(**spec["arch"])
        return [(name, max(1, net.get_submodule(name).out_channels // 2)) for name in convolutions(net.config())]
    return [(str(conv), int(keep)) for conv, keep in spec["prunes"]]


def _npz(arrays: Mapping[str, Any]) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **{key: np.asarray(value) for key, value in arrays.items()})
    return buffer.getvalue()


def judge_call(net, conv: str, keep: int, reply: Mapping[str, Any], body: bytes, images) -> tuple[Any, list[str]]:
    """``(the network the grader rebuilt from the returned tensors, the problems of the call's answer)`` (see the
    module's help): no problem when it passed; ``None`` and the problems when it did not."""
    import numpy as np
    import torch

    from util.artifacts import _read_npz
    from util.labs.lab16.costs import count_macs, count_params
    from util.labs.lab16.residual import ResidualNet, config_from_state, masked_residual

    where = f"prune_residual(model, {conv!r}, {keep})"
    if "group" not in reply:
        return None, [f"{where}, run by the grader on a network of its own, raised {str(reply.get('raised'))[:300]}"]
    config = net.config()
    group = next(g for g in reference_groups(config) if conv in g)
    found = reply["group"]
    if not isinstance(found, list) or not all(isinstance(n, str) for n in found) or sorted(set(found)) != group:
        named = set(found) if isinstance(found, list) else set()
        missing, extra = sorted(set(group) - named), sorted(named - set(group))
        return None, [f"{where} named the group {sorted(named)[:8]}"
                + (f"; it misses {', '.join(missing[:4])}" if missing else "")
                + (f"; {', '.join(extra[:4])} {'is' if len(extra) == 1 else 'are'} not coupled to {conv}" if extra else "")
                + ": a group is every convolution whose output channels are added to one another's, directly or "
                  "through other additions (a concatenation couples nothing)"]
    arrays, why = _read_npz(body)
    if arrays is None:
        return None, [f"{where}: the returned network's tensors could not be read ({why})"]
    expected_config = pruned_config(config, group, keep)
    rebuilt_config = config_from_state({key: value.shape for key, value in arrays.items()}, config["blocks"])
    if rebuilt_config is None:
        return None, [f"{where}: the returned network does not hold a weight for every convolution and fc under the "
                "original's names"]
    if rebuilt_config != expected_config:
        return None, [f"{where}: the returned network's convolutions have other widths than the group's {keep} channels "
                "(the group's members cut to keep, every other convolution as it was)"]
    try:
        rebuilt = ResidualNet(**rebuilt_config)
    except ValueError as exc:
        return None, [f"{where}: the returned network's widths make no network of this architecture ({exc})"]
    reference = rebuilt.state_dict()
    if sorted(arrays) != sorted(reference):
        missing, extra = sorted(set(reference) - set(arrays)), sorted(set(arrays) - set(reference))
        return None, [f"{where}: the returned network holds other tensors than the architecture's"
                + (f" (it lacks {', '.join(missing[:3])})" if missing else "")
                + (f" (it also holds {', '.join(extra[:3])})" if extra else "")]
    for key, value in reference.items():
        if tuple(arrays[key].shape) != tuple(value.shape) or arrays[key].dtype != np.dtype(str(value.dtype)[6:]):
            return None, [f"{where}: {key} has shape {list(arrays[key].shape)} ({arrays[key].dtype}); the cut network needs "
                    f"{list(value.shape)} ({str(value.dtype)[6:]}): cut the inputs of every layer that reads the "
                    "group's channels too (the next blocks' convolutions, a shortcut, fc; after a concatenation, "
                    "the columns at that side's offset)"]
    rebuilt.load_state_dict({key: torch.from_numpy(np.array(value)) for key, value in arrays.items()})
    rebuilt.eval()
    grader = ResidualNet(**expected_config).eval()
    if (count_params(rebuilt), count_macs(rebuilt)) != (count_params(grader), count_macs(grader)):
        return None, [f"{where}: the returned network's parameters or MACs, counted by the grader, differ from the "
                "group cut to its channels"]  # pragma: no cover - same shapes, same counts
    with torch.no_grad():
        out, wanted = rebuilt(images), masked_residual(net, group, keep)(images)
    if not torch.isfinite(out).all():
        return None, [f"{where}: the returned network's outputs hold NaN or infinity"]
    scale = float(wanted.abs().max()) or 1.0
    difference = float((out.double() - wanted.double()).abs().max()) / scale
    if not difference <= OUTPUT_RTOL:
        return None, [f"{where}: the returned network's outputs differ from those of the network with the same group's "
                f"dropped channels masked (zero filters, BatchNorm scale and shift) by {difference:.2g} of their "
                f"largest value (at most {OUTPUT_RTOL:g}): keep the channels of largest importance summed over the "
                "group's convolutions (the L1 norm of each member's filter), each member's BatchNorm entries, and "
                "every reader's inputs from those very channels"]
    return rebuilt, []


def reference_groups(config: Mapping[str, Any]) -> list[list[str]]:
    """The grader's groups of coupled convolutions, from the architecture (not from a graph a student traced): the
    convolutions whose outputs are added together share their channels. Each group sorted, groups by their first
    name."""
    groups: list[list[str]] = []
    current = ["stem"]            # the group that produces the running tensor's channels (None after a concat)
    for number, (kind, *_widths) in enumerate(config["blocks"], start=1):
        name = f"block{number}"
        groups.append([f"{name}.conv1"] if kind != "concat" else [f"{name}.left"])
        if kind == "basic":
            current.append(f"{name}.conv2")
        elif kind == "down":
            if current:
                groups.append(current)
            current = [f"{name}.conv2", f"{name}.short"]
        else:
            if current:
                groups.append(current)
            groups.append([f"{name}.right"])
            current = []
    if current:
        groups.append(current)
    return sorted((sorted(group) for group in groups), key=lambda g: g[0])


def pruned_config(config: Mapping[str, Any], group: Sequence[str], keep: int) -> dict[str, Any]:
    """The config of ``config``'s network with ``group`` cut to ``keep`` channels."""
    found = {"stem": int(config["stem"]), "blocks": [list(b) for b in config["blocks"]],
             "in_channels": int(config.get("in_channels", 1)), "classes": int(config.get("classes", 10))}
    slot = {"conv1": 1, "conv2": 2, "short": 2, "left": 1, "right": 2}
    for name in group:
        if name == "stem":
            found["stem"] = keep
            continue
        block, part = name.split(".")
        entry = found["blocks"][int(block[len("block"):]) - 1]
        if entry[0] != "basic" or part == "conv1":     # a basic block's conv2 has its input's width
            entry[slot[part]] = keep
    return found


def _state(net) -> bytes:
    return _npz({key: value.numpy() for key, value in net.state_dict().items()})


def check_residual(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 16.7 (see the module's help)."""
    import torch

    from util.artifacts import read_saved_arrays
    from util.judging import secret
    from util.student_process import ChannelError

    torch.set_num_threads(1)
    arrays, problems = read_saved_arrays(data, expected=["function"])
    if problems:
        return problems
    key = json.dumps(dict(spec), sort_keys=True)
    images = torch.randn(32, 1, 8, 8, generator=torch.Generator().manual_seed(secret.seed("lab16", "16.7 images", key)))
    todo = [calls(network) for network in networks(spec)]
    timed = spec.get("timed")
    cpu = max(os.sched_getaffinity(0))      # the CPU the timed case measures on, for every case's process
    seconds = START_SECONDS + CALL_SECONDS * (sum(map(len, todo)) + (int(timed["rounds"]) + 1 if timed else 0))
    student, passed = None, False
    try:
        student = kept.student("prune_residual", arrays["function"].tobytes(), seconds, cpu)
        problems = _judge(spec, student, todo, images, key, timed)
        passed = not problems
    except ChannelError as exc:
        problems = [f"the grader could not run prune_residual again ({exc})"]
    finally:
        if passed:
            kept.keep(student)     # for the next case (see the module's help)
        else:
            kept.drop(student)
    return problems


def _judge(spec, student, todo, images, key: str, timed) -> list[str]:
    """The calls of a case in ``student`` (with its function loaded), then the timing if the case has one."""
    import torch

    from util.judging import secret
    from util.labs.lab16.costs import count_params
    from util.labs.lab16.residual import build_residual, unstructured_like

    for index, (network, prunes) in enumerate(zip(networks(spec), todo)):
        net = current = build_residual(network["arch"], weights_seed(spec, index))
        for conv, keep in prunes:
            given = current if network.get("chain") else net   # a chain cuts what the last call returned
            student.send({"config": given.config(), "conv": conv, "keep": keep}, data=_state(given))
            reply, body = student.receive(timeout=START_SECONDS + CALL_SECONDS)
            rebuilt, found = judge_call(given, conv, keep, reply, body, images)
            if found:
                return [f"cutting one group after another, {found[0]}" if network.get("chain") else found[0]]
            current = rebuilt
    if timed:
        draws = secret.seed("lab16", "16.7 timed images", key)

        def batch(number: int):
            return torch.randn(int(timed["batch"]), 1, 8, 8, generator=torch.Generator().manual_seed(draws + number))

        sparse = unstructured_like(net, count_params(current))
        for _attempt in range(ATTEMPTS):    # noise only ever slows: a network that fails is timed again
            problems, _measured = time_networks(student, net, sparse, current, timed, batch)
            if not problems:
                break
        return problems
    return []


def _local(net, x, calls: int) -> tuple[float, float]:
    """``(the best wall seconds of one call, the thread's CPU seconds over all of them)`` of ``calls`` forward passes of
    ``net`` in this process."""
    import torch

    best, cpu = float("inf"), time.thread_time()
    with torch.no_grad():
        for _ in range(calls):
            start = time.perf_counter()
            net(x)
            best = min(best, time.perf_counter() - start)
    return best, time.thread_time() - cpu


def time_networks(student, dense, sparse, rebuilt, timed: Mapping[str, Any], images) -> tuple[list[str], dict]:
    """The student's last returned network timed in its process against the dense network and its unstructured
    twin in the judge's (see the module's help): ``(problems, measured)``. Each call is timed on its own (a request
    and its answer for the student's; noise only ever adds time, so the best call of all the rounds is the figure),
    and the CPU time of all the calls is counted too, the student process's by the grader from outside: on a loaded
    machine a process waits for a CPU, which its wall time counts and its CPU time does not. The speed-up is the
    larger of the two ratios."""
    import numpy as np
    import torch

    rounds, calls, batch = int(timed["rounds"]), int(timed["calls"]), int(timed["batch"])
    best = {"dense": float("inf"), "unstructured": float("inf"), "channels": float("inf")}
    cpu = {"dense": 0.0, "unstructured": 0.0, "channels": 0.0}
    processor = max(os.sched_getaffinity(0))
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {processor})   # the baselines on the CPU the student process is pinned to
    try:
        for number in range(rounds + 1):        # round 0 warms every network up and is not counted
            x = images(number)
            student.pause()                     # nothing of the student's runs while the baselines are timed
            try:
                spent = {"dense": _local(dense, x, calls), "unstructured": _local(sparse, x, calls)}
            finally:
                student.resume()
            data = x.numpy().astype(np.float32).tobytes()
            with torch.no_grad():
                wanted = rebuilt(x)
            scale = float(wanted.abs().max()) or 1.0
            if number == 1:                     # the student's CPU from here on: only its timed calls run now
                before = student.stats()["cpu_seconds"]
            fastest = float("inf")
            for _ in range(calls):
                start = time.perf_counter()
                student.send({"time": 1, "shape": list(x.shape)}, data=data)
                reply, body = student.receive(timeout=CALL_SECONDS)
                fastest = min(fastest, time.perf_counter() - start)
                if "output" not in reply:
                    return [f"the cut network, run by the grader to time it, raised {str(reply.get('raised'))[:300]}"], {}
                if len(body) != wanted.numel() * 4:
                    return ["the cut network's outputs, timed by the grader, have another shape than its rebuilt "
                            "one's"], {}
                found = torch.from_numpy(np.frombuffer(body, dtype=np.float32).reshape(wanted.shape).copy())
                if not float((found.double() - wanted.double()).abs().max()) / scale <= OUTPUT_RTOL:
                    return ["the network you returned computes, when the grader times it, something else than the "
                            "network its tensors make"], {}
            spent["channels"] = fastest, 0.0
            if number:
                for key, (wall, used) in spent.items():
                    best[key], cpu[key] = min(best[key], wall), cpu[key] + used
        cpu["channels"] = student.stats()["cpu_seconds"] - before
    finally:
        os.sched_setaffinity(0, mine)
    wall_speedup = best["dense"] / best["channels"]
    cpu_speedup = cpu["dense"] / max(cpu["channels"], 1e-3)
    measured = {"dense_ms": 1e3 * best["dense"], "unstructured_ms": 1e3 * best["unstructured"],
                "channels_ms": 1e3 * best["channels"], "wall_speedup": wall_speedup, "cpu_speedup": cpu_speedup,
                "speedup": max(wall_speedup, cpu_speedup), "unstructured_speedup": best["dense"] / best["unstructured"]}
    if measured["speedup"] < float(timed["min_speedup"]):
        return [f"the cut network ran {wall_speedup:.2f}x as fast as the dense one (its best call of {rounds} x "
                f"{calls} on {batch} images, timed by the grader: dense {measured['dense_ms']:.2f} ms, yours "
                f"{measured['channels_ms']:.2f} ms) and used {cpu_speedup:.2f}x less CPU time over them; at least "
                f"{float(timed['min_speedup']):g}x is needed"], measured
    return [], measured
