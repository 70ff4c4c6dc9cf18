"""The student's side of the grader's tasks 16.7 and 16.9 (``lora_harness.py``), in one student process.

The grader prunes residual networks the notebook never shows, their weights drawn from the grading secret in its
judge (``judge_residual.py``), with the student's ``prune_residual``. That function is student code, so it runs
here, in a student process (:mod:`util.student_process`), never in the judge: :func:`serve` loads it first
(bounded, :func:`util.judging.student_code.load`, before anything of a case reaches this process), then, for each
call the judge asks for, builds the course's :class:`~util.labs.lab16.residual.ResidualNet` from the architecture
and the weights it was sent, calls the function, and sends back the group it named and every tensor the returned
network holds (:func:`util.labs.lab16.tasks.plain_tensors`: read where PyTorch keeps them, never through a method of
the returned object), as plain arrays; for the timed case it runs the last network the function returned on the
images the judge sends, as many times as it is told, while the judge times it from outside. This process never sees
the grading secret, a case's spec or a seed: only one network, the convolution named and the channels to keep, or
the images to run.
"""
from __future__ import annotations

import io

from util.student_process import Channel, ChannelError

MAX_CODE = 1 << 20
"""The most bytes the pickled ``prune_residual`` may take: code, not tables of answers."""
MAX_TENSORS = 200
"""The most tensors a returned network may hold (the largest hidden network holds about 60)."""


def _network(header: dict, data: bytes):
    import numpy as np
    import torch

    from util.labs.lab16.residual import ResidualNet

    net = ResidualNet(**header["config"])
    with np.load(io.BytesIO(data), allow_pickle=False) as saved:
        net.load_state_dict({key: torch.from_numpy(saved[key].copy()) for key in saved.files})
    return net.eval()


def _answer(result) -> tuple[dict, bytes]:
    import numpy as np
    import torch
    from torch import nn

    from util.labs.lab16.tasks import plain_tensors

    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"prune_residual must return (group, network), not {type(result).__name__}")
    group, network = result
    if not isinstance(group, (list, tuple)) or not all(isinstance(name, str) for name in group) or len(group) > 100:
        raise TypeError("the group prune_residual returns must be a list of convolution names (str)")
    if not isinstance(network, nn.Module):
        raise TypeError(f"prune_residual must return the smaller network as an nn.Module, not "
                        f"{type(network).__name__}")
    held = plain_tensors(network, buffers=True)
    if len(held) > MAX_TENSORS:
        raise ValueError(f"the returned network holds {len(held)} tensors; at most {MAX_TENSORS}")
    arrays = {}
    for name, (tensor, _) in held.items():
        if tensor.dtype not in (torch.float32, torch.float64, torch.int64):
            raise TypeError(f"{name} is {tensor.dtype}; the network's tensors are float32 (int64 for a BatchNorm's "
                            "count)")
        arrays[name] = tensor.numpy()
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return {"group": [str(name) for name in group]}, buffer.getvalue()


def _timed(network, header: dict, data: bytes) -> tuple[dict, bytes]:
    """``header["time"]`` forward passes of the last network the function returned on the images sent (float32 of
    ``header["shape"]``), in eval mode without autograd: the judge times them from its side of the socket."""
    import numpy as np
    import torch

    if network is None:
        raise RuntimeError("no network to time: prune_residual has not returned one")
    x = torch.from_numpy(np.frombuffer(data, dtype=np.float32).reshape([int(n) for n in header["shape"]]).copy())
    network.eval()
    with torch.no_grad():
        for _ in range(int(header["time"])):
            out = network(x)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the cut network returned a {type(out).__name__}, not a tensor")
    return {"output": True}, out.detach().to(torch.float32).contiguous().numpy().tobytes()


def serve(channel: Channel) -> None:
    """``{"function": name}`` + a pickled function: loaded under ``name`` (``true``: ``prune_residual``), answered only
    when it fails (``{"raised": message}``, and the process ends); then per 16.7 call ``{"config", "conv", "keep"}`` +
    the network's ``state_dict`` (an ``.npz``): ``{"group": [...]}`` + the returned network's tensors (an ``.npz``),
    or ``{"raised": message}``; or ``{"time": calls, "shape"}`` + images (float32): the last returned network run
    ``calls`` times on them, ``{"output": true}`` + its last output (float32); per 16.9 call ``{"lora": ...}``
    (:mod:`util.labs.lab16.lora_harness`); until the judge closes the socket. One process serves both tasks'
    cases (the judge keeps it, and may start it early: it imports PyTorch first): each function is loaded before any of its task's inputs reach it."""
    import torch
    import torch.fx  # noqa: F401 - the course's warm-up: what a tracing function imports first

    from util.judging.student_code import load
    from util.labs.lab10 import gpt  # noqa: F401 - what 16.9's calls build
    from util.labs.lab16 import lora_harness, residual  # noqa: F401

    torch.set_num_threads(1)      # all of it course code, before any function or input reaches this process
    functions: dict = {}
    last = None
    while True:
        try:
            header, data, _ = channel.receive()
        except ChannelError:
            return
        if "function" in header:
            name = "prune_residual" if header["function"] is True else str(header["function"])
            try:
                functions[name] = load(data, limit=MAX_CODE)   # before any input of its task reaches this process
            except Exception as exc:  # a function that cannot be unpickled here
                channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
                return
            continue
        try:
            if "lora" in header:
                reply, body = lora_harness.answer(functions["lora_gpt"], header["lora"], data)
            elif "time" in header:
                reply, body = _timed(last, header, data)
            else:
                result = functions["prune_residual"](_network(header, data), str(header["conv"]), int(header["keep"]))
                reply, body = _answer(result)
                last = result[1]
        except Exception as exc:  # the student's code may raise anything: say what, as the kernel would
            channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        try:
            channel.send(reply, data=body)
        except ChannelError:
            return
