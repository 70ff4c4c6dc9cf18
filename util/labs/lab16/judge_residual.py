"""Task 16.7's judge: residual networks pruned by the student's ``prune_residual``, in a student process.

For each case the judge builds the case's :class:`~util.labs.lab16.residual.ResidualNet` with weights and BatchNorm
statistics drawn from the grading secret (:func:`weights_seed`, :mod:`util.judging.secret`: never from the spec
alone, so no network can be known before grading), and for each of the case's calls ``(conv, keep)`` sends the
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
Feedback names the convolution asked about and what differs, never the grader's figures.
"""
from __future__ import annotations

import io
import json
from typing import Any, Mapping, Sequence

from util.contract import Tolerance

OUTPUT_RTOL = 1e-4
"""Outputs against the masked network's, relative to their largest magnitude (float32 sums in another order)."""
HARNESS = "util.labs.lab16.residual_harness:serve"
START_SECONDS = 60.0
"""How long the student process may take to start and load the function."""
CALL_SECONDS = 30.0
"""How long one call of ``prune_residual`` may take (tracing and cutting a small network: well under a second)."""
MAX_REPLY = 8 << 20
"""The largest answer the judge takes back from the student process."""


def weights_seed(spec: Mapping[str, Any]) -> int:
    """The seed of a case's network, drawn from the grading secret for this case."""
    from util.judging import secret

    return secret.seed("lab16", "16.7 weights", json.dumps(dict(spec), sort_keys=True), bits=62)


def calls(spec: Mapping[str, Any]) -> list[tuple[str, int]]:
    """A case's ``(conv, keep)`` calls: its ``prunes``, or (``"every"``) every convolution cut to half its width."""
    from util.labs.lab16.residual import ResidualNet, convolutions

    if spec.get("every"):
        net = ResidualNet(**spec["arch"])
        return [(name, max(1, net.get_submodule(name).out_channels // 2)) for name in convolutions(net.config())]
    return [(str(conv), int(keep)) for conv, keep in spec["prunes"]]


def _npz(arrays: Mapping[str, Any]) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **{key: np.asarray(value) for key, value in arrays.items()})
    return buffer.getvalue()


def judge_call(net, conv: str, keep: int, reply: Mapping[str, Any], body: bytes, images) -> list[str]:
    """The problems of one call's answer (see the module's help), or none."""
    import numpy as np
    import torch

    from util.artifacts import _read_npz
    from util.labs.lab16.costs import count_macs, count_params
    from util.labs.lab16.residual import ResidualNet, config_from_state, masked_residual

    where = f"prune_residual(model, {conv!r}, {keep})"
    if "group" not in reply:
        return [f"{where}, run by the grader on a network of its own, raised {str(reply.get('raised'))[:300]}"]
    config = net.config()
    group = next(g for g in reference_groups(config) if conv in g)
    found = reply["group"]
    if not isinstance(found, list) or not all(isinstance(n, str) for n in found) or sorted(set(found)) != group:
        named = set(found) if isinstance(found, list) else set()
        missing, extra = sorted(set(group) - named), sorted(named - set(group))
        return [f"{where} named the group {sorted(named)[:8]}"
                + (f"; it misses {', '.join(missing[:4])}" if missing else "")
                + (f"; {', '.join(extra[:4])} {'is' if len(extra) == 1 else 'are'} not coupled to {conv}" if extra else "")
                + ": a group is every convolution whose output channels are added to one another's, directly or "
                  "through other additions (a concatenation couples nothing)"]
    arrays, why = _read_npz(body)
    if arrays is None:
        return [f"{where}: the returned network's tensors could not be read ({why})"]
    expected_config = pruned_config(config, group, keep)
    rebuilt_config = config_from_state({key: value.shape for key, value in arrays.items()}, config["blocks"])
    if rebuilt_config is None:
        return [f"{where}: the returned network does not hold a weight for every convolution and fc under the "
                "original's names"]
    if rebuilt_config != expected_config:
        return [f"{where}: the returned network's convolutions have other widths than the group's {keep} channels "
                "(the group's members cut to keep, every other convolution as it was)"]
    try:
        rebuilt = ResidualNet(**rebuilt_config)
    except ValueError as exc:
        return [f"{where}: the returned network's widths make no network of this architecture ({exc})"]
    reference = rebuilt.state_dict()
    if sorted(arrays) != sorted(reference):
        missing, extra = sorted(set(reference) - set(arrays)), sorted(set(arrays) - set(reference))
        return [f"{where}: the returned network holds other tensors than the architecture's"
                + (f" (it lacks {', '.join(missing[:3])})" if missing else "")
                + (f" (it also holds {', '.join(extra[:3])})" if extra else "")]
    for key, value in reference.items():
        if tuple(arrays[key].shape) != tuple(value.shape) or arrays[key].dtype != np.dtype(str(value.dtype)[6:]):
            return [f"{where}: {key} has shape {list(arrays[key].shape)} ({arrays[key].dtype}); the cut network needs "
                    f"{list(value.shape)} ({str(value.dtype)[6:]}): cut the inputs of every layer that reads the "
                    "group's channels too (the next blocks' convolutions, a shortcut, fc; after a concatenation, "
                    "the columns at that side's offset)"]
    rebuilt.load_state_dict({key: torch.from_numpy(np.array(value)) for key, value in arrays.items()})
    rebuilt.eval()
    grader = ResidualNet(**expected_config).eval()
    if (count_params(rebuilt), count_macs(rebuilt)) != (count_params(grader), count_macs(grader)):
        return [f"{where}: the returned network's parameters or MACs, counted by the grader, differ from the "
                "group cut to its channels"]  # pragma: no cover - same shapes, same counts
    with torch.no_grad():
        out, wanted = rebuilt(images), masked_residual(net, group, keep)(images)
    if not torch.isfinite(out).all():
        return [f"{where}: the returned network's outputs hold NaN or infinity"]
    scale = float(wanted.abs().max()) or 1.0
    difference = float((out.double() - wanted.double()).abs().max()) / scale
    if not difference <= OUTPUT_RTOL:
        return [f"{where}: the returned network's outputs differ from those of the network with the same group's "
                f"dropped channels masked (zero filters, BatchNorm scale and shift) by {difference:.2g} of their "
                f"largest value (at most {OUTPUT_RTOL:g}): keep the channels of largest importance summed over the "
                "group's convolutions (the L1 norm of each member's filter), each member's BatchNorm entries, and "
                "every reader's inputs from those very channels"]
    return []


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


def check_residual(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 16.7 (see the module's help)."""
    import torch

    from util.artifacts import read_saved_arrays
    from util.judging import secret
    from util.labs.lab16.residual import build_residual
    from util.student_process import ChannelError, StudentProcess

    torch.set_num_threads(1)
    arrays, problems = read_saved_arrays(data, expected=["function"])
    if problems:
        return problems
    net = build_residual(spec["arch"], weights_seed(spec))
    state = _npz({key: value.numpy() for key, value in net.state_dict().items()})
    images = torch.randn(32, net.in_channels, 8, 8, generator=torch.Generator().manual_seed(
        secret.seed("lab16", "16.7 images", json.dumps(dict(spec), sort_keys=True))))
    todo = calls(spec)
    try:
        with StudentProcess.start(HARNESS, max_data=MAX_REPLY,
                                  seconds=START_SECONDS + CALL_SECONDS * len(todo)) as student:
            student.send({"function": True}, data=arrays["function"].tobytes())
            for conv, keep in todo:
                student.send({"config": net.config(), "conv": conv, "keep": keep}, data=state)
                reply, body = student.receive(timeout=START_SECONDS + CALL_SECONDS)
                found = judge_call(net, conv, keep, reply, body, images)
                if found:
                    return found
    except ChannelError as exc:
        return [f"the grader could not run prune_residual again ({exc})"]
    return []
