"""Task 16.9's judge: LoRA on TinyGPT's attention, the student's ``lora_gpt`` run in the lab's student process.

For each case the judge draws a TinyGPT (lab 10's, in float64) from the grading secret (:func:`setting`: its widths,
heads, layers' vocabulary, ``r``, ``alpha``, ``batch``, ``length``, its weights; the case fixes only the kind of
attention, the number of layers and whether the head is tied), so no model can be known before grading; sends its
config and weights, token ids and adapter values of its own (:func:`~util.labs.lab16.nets.lora_values`) to the
student process (``lora_harness.py``, in the process :mod:`util.labs.lab16.judge_kept` keeps across the lab's cases),
and reads back what the function returned and every parameter the adapted model holds, as plain tensors with their
``requires_grad`` flags. Then, with its own computation:

* **trainable**: the parameters whose flag is set are exactly one ``lora_A`` (``r x d_model``) and one ``lora_B``
  (``out x r``) per query and value projection, counted here from those tensors (never the student's
  ``parameters()`` or any method of a student object), against the count the function returned too; every parameter
  of the base model still held, unchanged, frozen;
* **outputs**: the fresh adapted model's logits are the base model's; with the grader's adapter values they are those
  of the grader's own adapted model (:func:`reference_adapted`: ``base(x) + (x @ A.T @ B.T) * (alpha / r)`` on ``q``
  and ``v`` of every block), and each ``merged()`` holds ``W + (alpha / r) B A`` and the base's bias, all within
  :data:`RTOL` (float64);
* **memory** by lab 12's convention, every part against the grader's own: ``weights`` the bytes of every parameter
  (a tied head once), ``grads`` those of the trainable ones, ``optimizer_state`` twice those (Adam's two moments),
  ``activations`` the bytes of the unique storages autograd saves on one training step of the grader's adapted model
  (:func:`saved_bytes`: saved-tensor hooks, the model's parameters and buffers left out), which keeps the activations
  of the frozen layers too (the gradient flows back through them to the adapters of earlier blocks), and ``total``
  their sum.

The bytes that come back are untrusted: arrays read without pickle, names, shapes and dtypes checked before use.
Feedback names what differs, never the grader's figures.
"""
from __future__ import annotations

import io
import json
import os
import random
from typing import Any, Mapping

from util.contract import Tolerance
from util.labs.lab16 import judge_kept as kept

RTOL = 1e-9
"""Logits and merged weights against the grader's, relative to their largest magnitude (float64)."""
START_SECONDS = 60.0
"""How long the student process may take to start and load the function."""
CALL_SECONDS = 30.0
"""How long one call of ``lora_gpt`` may take (adapting and measuring a tiny model: well under a second)."""
PROJECTIONS = ("q", "v")
"""The projections LoRA adapts in every block's attention (Hu et al.'s choice)."""
PARTS = ("weights", "grads", "optimizer_state", "activations", "total")


def setting(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A case's model and call, drawn from the grading secret: ``{"config", "seed", "r", "alpha", "batch", "length"}``.
    The spec fixes ``attention`` (``"multi-head"``, ``"grouped-query"``: half as many key/value heads, ``"multi-query"``:
    one), ``layers`` and ``tied``."""
    from util.judging import secret

    rng = random.Random(secret.seed("lab16", "16.9 setting", json.dumps(dict(spec), sort_keys=True)))
    heads = 4 if spec["attention"] == "grouped-query" else rng.choice((2, 4))
    kv = {"multi-head": heads, "grouped-query": heads // 2, "multi-query": 1}[spec["attention"]]
    head_dim = rng.choice((4, 6, 8))
    r = rng.choice((2, 4, 8))
    config = {"vocab": rng.choice((48, 64, 80, 96)), "n_positions": 32, "d_model": heads * head_dim,
              "n_layer": int(spec["layers"]), "n_head": heads, "n_kv_head": kv, "d_ff": None, "tied": bool(spec["tied"])}
    return {"config": config, "seed": rng.getrandbits(62), "r": r,
            "alpha": rng.choice([a for a in (4.0, 8.0, 16.0, 32.0) if a != r]),
            "batch": rng.randint(2, 4), "length": rng.randint(6, 16)}


def targets(config: Mapping[str, Any]) -> list[str]:
    """The adapted projections' names: ``blocks.{i}.attn.q`` and ``.v`` of every block."""
    return [f"blocks.{i}.attn.{p}" for i in range(int(config["n_layer"])) for p in PROJECTIONS]


class _Adapter:
    """Built lazily (torch imported only when judging): the grader's own LoRALinear."""

    cls = None

    @classmethod
    def get(cls):
        if cls.cls is None:
            import torch
            from torch import nn

            class Adapter(nn.Module):
                def __init__(self, base, a, b, scaling: float):
                    super().__init__()
                    self.base, self.scaling = base, scaling
                    self.lora_A = nn.Parameter(a.clone().to(base.weight.dtype))
                    self.lora_B = nn.Parameter(b.clone().to(base.weight.dtype))

                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling

            cls.cls = Adapter
        return cls.cls


def reference_adapted(model, values: Mapping[str, tuple[Any, Any]], r: int, alpha: float):
    """A copy of ``model`` frozen, with the grader's adapters (values ``{target: (A, B)}``) on ``q`` and ``v``."""
    import copy

    adapted = copy.deepcopy(model)
    adapted.requires_grad_(False)
    adapter = _Adapter.get()
    for target, (a, b) in values.items():
        parent, _, child = target.rpartition(".")
        holder = adapted.get_submodule(parent)
        setattr(holder, child, adapter(getattr(holder, child), a, b, alpha / r))
    return adapted


def saved_bytes(model, batch: int, length: int) -> int:
    """Bytes of the unique storages autograd saves on one training step of ``model`` (lab 12's convention): train mode,
    token ids ``[batch, length]`` (zeros), ``cross_entropy`` of the logits against them; the model's parameters and
    buffers left out."""
    import torch
    import torch.nn.functional as F

    model.train()
    own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    storages: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in own:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    ids = torch.zeros(batch, length, dtype=torch.int64)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        logits = model(ids)
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1))
    model.eval()
    return sum(storages.values())


def expected_memory(adapted, batch: int, length: int) -> dict[str, int]:
    """Lab 12's training memory of the grader's adapted model, Adam, in the parameters' dtype: by part and total."""
    params = list(adapted.parameters())          # the grader's own model: a tied head once
    weights = sum(p.numel() * p.element_size() for p in params)
    grads = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    activations = saved_bytes(adapted, batch, length)
    return {"weights": weights, "grads": grads, "optimizer_state": 2 * grads, "activations": activations,
            "total": weights + 3 * grads + activations}


def _relative(found, expected) -> float:
    scale = float(expected.abs().max()) or 1.0
    return float((found.double() - expected.double()).abs().max()) / scale


def _npz(arrays: Mapping[str, Any]) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **{key: np.asarray(value) for key, value in arrays.items()})
    return buffer.getvalue()


def check_lora_gpt(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 16.9 (see the module's help)."""
    import torch

    from util.artifacts import read_saved_arrays
    from util.student_process import ChannelError

    torch.set_num_threads(1)
    arrays, problems = read_saved_arrays(data, expected=["function"])
    if problems:
        return problems
    student, passed = None, False
    try:
        student = kept.student("lora_gpt", arrays["function"].tobytes(), START_SECONDS + CALL_SECONDS,
                               max(os.sched_getaffinity(0)))
        problems = judge_case(spec, student)
        passed = not problems
    except ChannelError as exc:
        problems = [f"the grader could not run lora_gpt again ({exc})"]
    finally:
        if passed:
            kept.keep(student)
        else:
            kept.drop(student)
    return problems


def judge_case(spec: Mapping[str, Any], student) -> list[str]:
    """One case's call in ``student`` and every check of its answer (see the module's help)."""
    case = prepare(spec)
    student.send({"lora": case["request"]}, data=case["data"])
    reply, body = student.receive(timeout=START_SECONDS + CALL_SECONDS)
    return judge_reply(spec, case, reply, body)


def prepare(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What one case sends and keeps: ``{"setting", "model", "ids", "values", "request", "data"}``, the model, the token
    ids and the adapter values drawn from the grading secret (:func:`setting`), ``data`` the ``.npz`` sent."""
    import torch

    from util.judging import secret
    from util.labs.lab10.gpt import GPTConfig, seeded_gpt
    from util.labs.lab16.nets import lora_values

    found = setting(spec)
    config, r, alpha = found["config"], found["r"], found["alpha"]
    cfg = GPTConfig.from_dict(config)
    model = seeded_gpt(cfg, found["seed"] % (1 << 31)).double()
    ids = torch.randint(0, cfg.vocab, (found["batch"], found["length"]),
                        generator=torch.Generator().manual_seed(secret.seed("lab16", "16.9 ids", found["seed"])))
    names = targets(config)
    values = {}
    for index, target in enumerate(names):
        base = model.get_submodule(target)
        a, b = lora_values(found["seed"] % (1 << 31) + index, base.out_features, base.in_features, r)
        values[target] = (a.double(), b.double())
    sent = {f"state/{key}": value.numpy() for key, value in model.state_dict().items()}
    sent["ids"] = ids.numpy()
    for target, (a, b) in values.items():
        sent[f"A/{target}"], sent[f"B/{target}"] = a.numpy(), b.numpy()
    request = {"config": config, "r": r, "alpha": alpha, "batch": found["batch"], "length": found["length"],
               "targets": names}
    return {"setting": found, "model": model, "ids": ids, "values": values, "request": request, "data": _npz(sent)}


def judge_reply(spec: Mapping[str, Any], case: Mapping[str, Any], reply: Mapping[str, Any], body: bytes) -> list[str]:
    """The problems of the student process's answer to ``case`` (:func:`prepare`; see the module's help)."""
    import numpy as np
    import torch

    from util.artifacts import _read_npz
    from util.labs.lab10.gpt import GPTConfig

    found, model, ids, values = case["setting"], case["model"], case["ids"], case["values"]
    r, alpha = found["r"], found["alpha"]
    cfg = GPTConfig.from_dict(found["config"])
    names = list(values)
    where = (f"lora_gpt on a TinyGPT of the grader's ({cfg.n_layer} block{'s' if cfg.n_layer > 1 else ''}, "
             f"{spec['attention']} attention, r={r})")
    if "memory" not in reply:
        return [f"{where} raised {str(reply.get('raised'))[:300]}"]
    arrays, why = _read_npz(body)
    flags = reply.get("flags")
    if arrays is None or not isinstance(flags, dict) or not all(isinstance(v, bool) for v in flags.values()):
        return [f"{where}: what came back could not be read ({why or 'flags'})"]
    held = {key[len("parameter/"):]: value for key, value in arrays.items() if key.startswith("parameter/")}
    if sorted(held) != sorted(flags) or any(value.dtype.kind != "f" for value in held.values()):
        return [f"{where}: the adapted model's parameters came back unreadable"]
    # trainable: exactly the adapters, counted here from the tensors and their flags
    trainable = {name: value for name, value in held.items() if flags[name]}
    count = sum(int(value.size) for value in trainable.values())
    wanted = sorted([(r, cfg.d_model) for _ in names]
                    + [(model.get_submodule(t).out_features, r) for t in names])
    expected_count = sum(a * b for a, b in wanted)
    if count != expected_count:
        return [f"{where}: {count:,} parameters are trainable, {'more' if count > expected_count else 'fewer'} than "
                "the adapters' r x (d_model + out) per query and value projection of every block: LoRA adapts q and v "
                "of every block's attention and freezes everything else"]
    if sorted(tuple(v.shape) for v in trainable.values()) != wanted:
        return [f"{where}: the trainable parameters are not one lora_A (r x d_model) and one lora_B (out x r) for "
                "each block's query and value projections"]
    if not isinstance(reply["trainable"], int) or isinstance(reply["trainable"], bool):
        return [f"{where}: 'trainable' came back as no int"]
    if reply["trainable"] != count:
        return [f"{where} returned trainable={reply['trainable']:,}; the adapted model it returned trains "
                f"{'fewer' if reply['trainable'] > count else 'more'} (counted by the grader from its parameters' "
                "requires_grad flags)"]
    frozen = [value for name, value in held.items() if not flags[name]]
    for name, parameter in model.named_parameters():
        values_ = parameter.detach().numpy()
        match = next((i for i, f in enumerate(frozen) if f.shape == values_.shape and np.array_equal(f, values_)), None)
        if match is None:
            return [f"{where}: the adapted model no longer holds the base model's {name} as a frozen parameter, "
                    "unchanged (in its dtype, float64 here)"]
        frozen.pop(match)
    # outputs: fresh, adapted with the grader's values, and merged
    reference = reference_adapted(model, values, r, alpha)
    with torch.no_grad():
        base_out, adapted_out = model(ids), reference(ids)
    logits_shape = tuple(base_out.shape)
    for key in ("fresh", "adapted"):
        if key not in arrays or arrays[key].shape != logits_shape:
            return [f"{where}: the adapted model's logits came back with another shape than {list(logits_shape)}"]
    if not _relative(torch.from_numpy(arrays["fresh"]), base_out) <= RTOL:
        return [f"{where}: right after lora_gpt the model's logits changed; a fresh adapter must leave them as they "
                "were (lora_B starts at zero)"]
    if not _relative(torch.from_numpy(arrays["adapted"]), adapted_out) <= RTOL:
        return [f"{where}: with the grader's values in each lora_A and lora_B the logits are not those of base(x) + "
                "(x @ A.T @ B.T) * (alpha / r) on q and v (relative difference above 1e-9): check the scaling and "
                "that the adapters are computed in the base's dtype"]
    for target, (a, b) in values.items():
        base = model.get_submodule(target)
        weight = base.weight.detach() + (alpha / r) * (b @ a)
        merged = arrays.get(f"merged/{target}/weight")
        if merged is None or merged.shape != tuple(weight.shape) or \
                not _relative(torch.from_numpy(merged), weight) <= RTOL:
            return [f"{where}: {target}.merged() does not hold W + (alpha / r) B A (relative difference above 1e-9)"]
        bias = arrays.get(f"merged/{target}/bias")
        if bias is None or not np.array_equal(bias, base.bias.detach().numpy()):
            return [f"{where}: {target}.merged() does not keep the base's bias unchanged"]
    # memory by part, against the grader's own measurement
    memory = expected_memory(reference, found["batch"], found["length"])
    problems = []
    for part in PARTS:
        got = reply["memory"].get(part) if isinstance(reply["memory"], dict) else None
        if not isinstance(got, int) or isinstance(got, bool):
            return [f"{where}: memory[{part!r}] came back as no int"]
        if got != memory[part]:
            problems.append(f"{where}: memory[{part!r}] is {got:,} bytes, "
                            f"{'more' if got > memory[part] else 'less'} than the grader "
                            f"measured ({_MEANING[part]})")
    return problems[:2]


_MEANING = {
    "weights": "every parameter's bytes in its dtype, a tied head once, the adapters' included",
    "grads": "the trainable parameters' bytes",
    "optimizer_state": "Adam's two moments: twice the trainable parameters' bytes",
    "activations": "the unique storages autograd saves on one training step, the frozen layers' too, parameters and "
                   "buffers left out",
    "total": "the sum of the four parts",
}
