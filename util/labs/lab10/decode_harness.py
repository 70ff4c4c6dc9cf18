"""The student's side of the grader's replay of task 10.5's decoding, in a student process.

The grader does not take a notebook's word, nor the word of anything that runs beside the notebook's code,
for how a decoding fed the model: code in the same process can remove a hook, call ``F.linear`` on a module's
weight instead of the module, or rewrite a recorder's lists. So the judge replays the student's ``generate``
(saved by the hidden case, pickled with cloudpickle) in a student process the grader starts
(:mod:`util.student_process`), on a model whose weights never reach that process: every ``nn.Linear`` and both
embeddings of the :class:`~util.labs.lab10.gpt.TinyGPT` it gets are :class:`Served` modules. Calling one sends
its input to the judge, which computes the module with weights of its own (drawn from a seed the notebook
never sees), counts the rows and records the ids and positions, then answers. What the judge decides from (the
rows each Linear processed in each step, the ids given to ``model.wte``, the positions given to ``model.wpe``)
is thus recorded in the judge's process, where the student's code cannot reach it; and without the weights the
student's code cannot compute the model any other way. The LayerNorms are real modules with PyTorch's
initialisation (weight 1, bias 0), as in every model of the lab.

A cached forward built from the model's modules (the notebook's ``forward_cached``) runs here unchanged. Code that
reads a served module's ``weight`` gets an ``AttributeError`` saying to call the module instead.
"""
from __future__ import annotations

import numpy as np

from util.student_process import Channel, ChannelError

MAX_ROWS = 1 << 14
"""Rows (tokens times batch) one call of a served module may carry."""


class ReplayError(RuntimeError):
    """The judge refused a call of a served module (too many rows, a wrong shape or dtype): its message says why."""


def _served_class():
    import torch
    from torch import nn

    class Served(nn.Module):
        """A module of the model computed by the grader's judge: ``module(x)`` sends ``x`` and returns the answer."""

        def __init__(self, channel: Channel, name: str, original: nn.Module) -> None:
            super().__init__()
            self._channel, self._name = channel, name
            self._embedding = isinstance(original, nn.Embedding)
            for size in ("in_features", "out_features", "num_embeddings", "embedding_dim"):
                if hasattr(original, size):
                    setattr(self, size, getattr(original, size))

        def forward(self, x):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"model.{self._name} takes a tensor, not a {type(x).__name__}")
            kind = np.int64 if self._embedding else np.float32
            array = np.ascontiguousarray(x.detach().cpu().numpy().astype(kind, copy=False))
            self._channel.send({"call": self._name, "shape": list(array.shape)}, data=array.tobytes())
            reply, data, _ = self._channel.receive()
            if "refused" in reply:
                raise ReplayError(str(reply["refused"])[:300])
            shape = [int(n) for n in reply["shape"]]
            return torch.from_numpy(np.frombuffer(data, dtype=np.float32).reshape(shape).copy())

        def __getattr__(self, name: str):
            if name in ("weight", "bias"):
                raise AttributeError(f"in the grader's replay the weights of model.{self._name} stay with the grader: "
                                     f"call the module (model.{self._name}(x)), as the task asks, instead of reading "
                                     f"its {name}")
            return super().__getattr__(name)

        def extra_repr(self) -> str:
            return f"served by the grader: {self._name}"

    return Served


def served_model(channel: Channel, config: dict):
    """A :class:`~util.labs.lab10.gpt.TinyGPT` of ``config`` whose Linears and embeddings are served by the judge
    (named as in the model: ``wte``, ``blocks.0.attn.q``, ..., ``head``)."""
    from torch import nn

    from util.labs.lab10.gpt import GPTConfig, build_gpt

    Served = _served_class()
    model = build_gpt(GPTConfig.from_dict(config))
    for name, module in list(model.named_modules()):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            parent, _, attribute = name.rpartition(".")
            owner = model.get_submodule(parent) if parent else model
            setattr(owner, attribute, Served(channel, name, module))
    return model.eval()


def serve(channel: Channel) -> None:
    """For each ``{"decode": {"config", "prompt", "new"}}`` + the pickled ``generate`` (one per hidden case, until
    the judge closes the socket): run ``generate(model, prompt, new, use_cache=True)`` on a served model of that
    config, answering nothing itself; then send ``{"result": {"tokens": shape, "cache": [[k shape, v shape], ...]}}``
    + the tokens (int64) and the cache (float32), or ``{"raised": message}``."""
    import torch

    torch.set_num_threads(1)
    while True:
        try:
            header, data, _ = channel.receive()
        except ChannelError:
            return
        _decode(channel, header["decode"], data)


def _decode(channel: Channel, request: dict, data: bytes) -> None:
    import cloudpickle
    import torch

    try:
        generate = cloudpickle.loads(data)
        model = served_model(channel, request["config"])
        prompt = torch.tensor(request["prompt"], dtype=torch.long)
        with torch.no_grad():
            result = generate(model, prompt, int(request["new"]), use_cache=True)
        tokens, cache = result
        tokens = np.ascontiguousarray(torch.as_tensor(tokens).numpy().astype(np.int64))
        pairs = [[np.ascontiguousarray(torch.as_tensor(t).detach().numpy()) for t in pair] for pair in cache]
        if not all(t.dtype == np.float32 for pair in pairs for t in pair):
            raise TypeError("generate's cache must hold float32 tensors")
    except Exception as exc:  # the student's code may raise anything: say what, as the kernel would
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    body = tokens.tobytes() + b"".join(t.tobytes() for pair in pairs for t in pair)
    channel.send({"result": {"tokens": list(tokens.shape), "cache": [[list(t.shape) for t in pair] for pair in pairs]}},
                 data=body)
