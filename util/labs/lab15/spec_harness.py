"""The student's side of the grader's re-run of task 15.6, in a student process.

The grader does not count target calls in the student's kernel, where the student's code runs beside any
counter. Its judge asks the grader for a student process (:mod:`util.student_process`) running
:func:`serve`: the student's ``speculative_generate`` (pickled by value by the hidden case) is called there
with a draft model built from weights the judge sends and a **target that lives in the judge**
(:class:`RemoteTarget`): every ``target(ids)`` sends the ids over the socket, and the judge computes the
logits with its own model, counting and checking each call. The judge compares the tokens returned with
its own greedy decoding of the target. Task 15.8's speculative sampling runs the same way, with the uniform draws
the judge serves for each run (drawn from the grading secret, which never reaches this process: only the draws).
"""
from __future__ import annotations

import numpy as np

from util.student_process import Channel, ChannelError


class RemoteTarget:
    """``target(ids) -> logits [1, T, vocab]`` (float64) computed by the grader's judge; ``cfg`` is the
    model's config. Calls the judge refuses (malformed ids, or too many calls) raise ``RuntimeError``."""

    def __init__(self, channel: Channel, cfg) -> None:
        self.channel, self.cfg = channel, cfg

    def __call__(self, ids):
        import torch

        ids = torch.as_tensor(ids)
        if ids.dim() != 2 or ids.shape[0] != 1 or ids.dtype != torch.long:
            raise ValueError(f"target(ids) takes a [1, T] tensor of token ids (int64); got {tuple(ids.shape)} "
                             f"({ids.dtype})")
        array = np.ascontiguousarray(ids[0].numpy().astype(np.int64))
        self.channel.send({"target": int(array.size)}, data=array.tobytes())
        reply, data, _ = self.channel.receive()
        if reply.get("logits") != [int(array.size), self.cfg.vocab]:
            raise RuntimeError(f"the grader's target refused the call: {str(reply.get('refused'))[:300]}")
        logits = np.frombuffer(data, dtype=np.float64).reshape(1, array.size, self.cfg.vocab)
        return torch.from_numpy(logits.copy())


def serve(channel: Channel) -> None:
    """``{"function": true}`` + the pickled function, then for each run ``{"draft": {"config", "names": [[name,
    shape], ...]}}`` + the draft's float64 weights and ``{"run": {"prompt": [...], "n": n, "k": k}}``: build the
    draft (a TinyGPT in float64, kept for the runs that follow until another comes), call
    ``speculative_generate(target, draft, prompt, n, k)`` with a :class:`RemoteTarget` (its calls are answered by
    the judge as they come), then send ``{"tokens": [...]}`` or ``{"raised": message}``; a run ``{"run": {...,
    "draws": count}}`` + ``count`` float64 draws calls ``speculative_sample(target, draft, prompt, n, k, draws)``
    with them as :class:`~util.labs.lab15.speculative.Uniforms` and answers ``{"tokens", "used"}``; until the judge
    closes the socket."""
    import torch

    torch.set_num_threads(1)
    try:
        _, pickled, _ = channel.receive()
    except ChannelError:
        return
    try:
        from util.judging.student_code import load

        function = load(pickled, limit=1 << 20)   # first, before any run's input reaches this process
    except Exception as exc:  # a function that cannot be unpickled here
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    draft = cfg = None
    while True:
        try:
            header, data, _ = channel.receive()
        except ChannelError:
            return
        if "draft" in header:  # the draft of the runs that follow (until the next one)
            cfg, draft = _draft(header, data)
            continue
        draws = None
        if "draws" in header.get("run", {}):  # speculative sampling (task 15.8): the judge's uniform draws
            from util.labs.lab15.speculative import Uniforms

            draws = Uniforms(np.frombuffer(data, dtype=np.float64)[:int(header["run"]["draws"])].tolist())
        try:
            tokens = _run(function, channel, cfg, draft, header["run"], draws)
        except ChannelError:
            return
        except Exception as exc:  # the student's code may raise anything: say what, as the kernel would
            channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        channel.send({"tokens": tokens[:4096], **({"used": draws.used} if draws is not None else {})})


def _draft(header: dict, weights: bytes):
    import torch

    from util.labs.lab10.gpt import GPTConfig, TinyGPT

    cfg = GPTConfig.from_dict(header["draft"]["config"])
    draft = TinyGPT(cfg).double().eval()
    state, offset = {}, 0
    for name, shape in header["draft"]["names"]:
        size = int(np.prod(shape, dtype=np.int64)) * 8
        state[name] = torch.from_numpy(np.frombuffer(weights[offset:offset + size], dtype=np.float64)
                                       .reshape(shape).copy())
        offset += size
    draft.load_state_dict(state)
    return cfg, draft


def _run(function, channel: Channel, cfg, draft, spec: dict, draws) -> list[int]:
    import torch

    prompt = torch.tensor([spec["prompt"]], dtype=torch.long)
    extra = () if draws is None else (draws,)
    with torch.no_grad():
        tokens = function(RemoteTarget(channel, cfg), draft, prompt, int(spec["n"]), int(spec["k"]), *extra)
    return [int(t) for t in torch.as_tensor(tokens).reshape(-1).tolist()]
