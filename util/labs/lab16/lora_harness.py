"""The student's side of the grader's task 16.9, in the lab's student process (``residual_harness.serve``).

The grader adapts TinyGPTs the notebook never shows, their sizes and weights drawn from the grading secret in its
judge (``judge_lora_gpt.py``), with the student's ``lora_gpt``. That function is student code, so it runs here, never
in the judge: :func:`answer` builds lab 10's :class:`~util.labs.lab10.gpt.TinyGPT` in float64 from the config and
weights it was sent, calls the function, and sends back what it returned (``trainable``, ``memory``), every
parameter the returned model holds with its ``requires_grad`` flag (:func:`util.labs.lab16.tasks.plain_tensors`:
read where PyTorch keeps them, never through a method of the returned object), the model's logits on the token ids
sent, then, with the adapter values sent put into each adapted projection's ``lora_A`` and ``lora_B``, the logits
again and what each projection's ``merged()`` holds. The judge counts, measures and compares all of it itself. This
process never sees the grading secret, a case's spec or a seed: one model, ``r``, ``alpha``, ``batch``, ``length``,
token ids and adapter values.
"""
from __future__ import annotations

import io
from typing import Any, Mapping

MAX_TENSORS = 400
"""The most parameters a returned model may hold (the largest hidden TinyGPT with adapters: about 70)."""
PARTS = ("weights", "grads", "optimizer_state", "activations", "total")
"""The keys of ``memory``, in lab 12's order."""


def _count(value: Any, what: str) -> int:
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} is a {type(value).__name__}; counts of parameters and bytes are ints")
    return int(value)


def answer(function, request: Mapping[str, Any], data: bytes) -> tuple[dict, bytes]:
    """``({"trainable", "memory", "flags"}, an .npz of parameter/NAME, fresh, adapted, merged/TARGET/weight|bias)``
    for one call of ``lora_gpt`` (see the module's help)."""
    import numpy as np
    import torch
    from torch import nn

    from util.labs.lab10.gpt import GPTConfig, TinyGPT
    from util.labs.lab16.tasks import plain_tensors

    with np.load(io.BytesIO(data), allow_pickle=False) as saved:
        arrays = {key: torch.from_numpy(saved[key].copy()) for key in saved.files}
    model = TinyGPT(GPTConfig.from_dict(request["config"])).double()
    model.load_state_dict({key[len("state/"):]: value for key, value in arrays.items() if key.startswith("state/")})
    model.eval()
    ids = arrays["ids"]
    result = function(model, int(request["r"]), float(request["alpha"]), int(request["batch"]), int(request["length"]))
    if not isinstance(result, Mapping) or sorted(result) != ["memory", "model", "trainable"]:
        raise TypeError("lora_gpt must return {'model', 'trainable', 'memory'}, not "
                        + (str(sorted(result))[:100] if isinstance(result, Mapping) else type(result).__name__))
    adapted = result["model"]
    if not isinstance(adapted, nn.Module):
        raise TypeError(f"lora_gpt's 'model' must be the adapted TinyGPT, not {type(adapted).__name__}")
    memory = result["memory"]
    if not isinstance(memory, Mapping) or sorted(memory) != sorted(PARTS):
        raise TypeError(f"lora_gpt's 'memory' must be a dict with the keys {', '.join(PARTS)}")
    reply = {"trainable": _count(result["trainable"], "'trainable'"),
             "memory": {part: _count(memory[part], f"memory[{part!r}]") for part in PARTS}}
    held = plain_tensors(adapted)
    if len(held) > MAX_TENSORS:
        raise ValueError(f"the adapted model holds {len(held)} parameters; at most {MAX_TENSORS}")
    out: dict[str, Any] = {}
    for name, (values, _) in held.items():
        out[f"parameter/{name}"] = values.numpy()
    reply["flags"] = {name: flag for name, (_, flag) in held.items()}
    adapted.eval()
    with torch.no_grad():
        out["fresh"] = adapted(ids).double().numpy()
    for target in request["targets"]:
        module = adapted.get_submodule(target)
        A, B = getattr(module, "lora_A", None), getattr(module, "lora_B", None)
        if not (isinstance(A, torch.Tensor) and isinstance(B, torch.Tensor) and callable(getattr(module, "merged", None))):
            raise TypeError(f"{target} should be a LoRALinear with lora_A, lora_B and merged(); it is a "
                            f"{type(module).__name__}")
        a, b = arrays[f"A/{target}"], arrays[f"B/{target}"]
        if A.shape != a.shape or B.shape != b.shape:
            raise ValueError(f"{target}: lora_A is {list(A.shape)} and lora_B {list(B.shape)}; with r={request['r']} "
                             f"they should be {list(a.shape)} and {list(b.shape)}")
        with torch.no_grad():
            A.copy_(a)
            B.copy_(b)
    with torch.no_grad():
        out["adapted"] = adapted(ids).double().numpy()
    for target in request["targets"]:
        merged = adapted.get_submodule(target).merged()
        if not isinstance(merged, nn.Linear):
            raise TypeError(f"{target}.merged() must return an nn.Linear, not {type(merged).__name__}")
        out[f"merged/{target}/weight"] = merged.weight.detach().double().numpy()
        if merged.bias is not None:
            out[f"merged/{target}/bias"] = merged.bias.detach().double().numpy()
    buffer = io.BytesIO()
    np.savez(buffer, **out)
    return reply, buffer.getvalue()
