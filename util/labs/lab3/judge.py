"""Lab 3's grader-side case checks, named by the tasks' ``grader_check`` (``tasks.py``).

Each takes the case's input ``spec``, the bytes of the model the student's function built for it,
and the task's tolerance, and returns the problems found (empty: the case passes). The rules
themselves live in :mod:`util.labs.lab3.tiling`.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import onnx

from util.contract import Tolerance
from util.labs.lab3 import tiling as tc


def gemm_inputs(spec: Mapping[str, Any]) -> tuple[dict[str, list[int]], list[int]]:
    """Graph input shapes (``A``, ``B``, ``C``) and the output shape for a Gemm case."""
    m, k, n = spec["M"], spec["K"], spec["N"]
    return ({"A": [k, m] if spec.get("trans_a") else [m, k], "B": [n, k] if spec.get("trans_b") else [k, n],
             "C": [n]}, [m, n])


def gemm_numbers(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """``Y`` against ``alpha * op(A) @ op(B) + beta * C`` in float64, on inputs drawn from the spec's seed."""
    shapes, _ = gemm_inputs(spec)
    rng = tc.rng_for(spec)
    feeds = {name: rng.uniform(-1, 1, shape).astype(np.float32) for name, shape in shapes.items()}
    a, b = feeds["A"].astype(np.float64), feeds["B"].astype(np.float64)
    a, b = (a.T if spec.get("trans_a") else a), (b.T if spec.get("trans_b") else b)
    expected = spec.get("alpha", 1.0) * (a @ b) + spec.get("beta", 1.0) * feeds["C"].astype(np.float64)
    outputs, problems = tc.run_model(data, feeds)
    if problems:
        return problems
    return tc.output_problems(outputs["Y"], expected, tolerance, "Y")


def check_gemm(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 3.1: exactly one Gemm node, inputs A/B/C and output Y of the right shapes, right numbers."""
    model, problems = tc.parse(data)
    if model is None:
        return problems
    shapes, out = gemm_inputs(spec)
    problems = tc.io_problems(model, shapes, {"Y": out})
    if [n.op_type for n in model.graph.node] != ["Gemm"]:
        problems.append(f"the model must be one Gemm node; it has {len(model.graph.node)} nodes "
                        f"({', '.join(sorted({n.op_type for n in model.graph.node}))})")
    problems += tc.structure_problems(model, allowed_ops={"Gemm"})
    return problems or gemm_numbers(spec, data, tolerance)


def check_tiled(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 3.2: the tiling rules for ``spec["bounds"]``, the same interface as the Gemm, right numbers."""
    model, problems = tc.parse(data)
    if model is None:
        return problems
    shapes, out = gemm_inputs(spec)
    problems = tc.io_problems(model, shapes, {"Y": out})
    problems += tc.structure_problems(model, allowed_ops=tc.TILING_OPS, bounds=tuple(spec["bounds"]))
    return problems or gemm_numbers(spec, data, tolerance)


def original_model(spec: Mapping[str, Any]) -> onnx.ModelProto:
    """The untiled model a model case starts from, built by the grader itself."""
    from util.labs.lab3.graphs import gemm_chain_graph
    from util.onnx_models import export_torchvision

    if spec["model"] == "gemm_chain":
        return gemm_chain_graph()
    return export_torchvision(spec["model"], input_shape=spec.get("input_shape", (1, 3, 224, 224)))


def check_model(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Tasks 3.3 and 3.6: every Gemm of a whole model replaced; same interface and outputs as the original.

    Operators allowed: those of the original except Gemm, plus the tiling operators. With
    ``spec["max_nodes_per_gemm"]`` the node count is capped at the original's plus that many per Gemm.
    """
    model, problems = tc.parse(data)
    if model is None:
        return problems
    original = original_model(spec)
    graph = original.graph
    inits = {i.name for i in graph.initializer}
    dims = lambda v: [d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    shapes = {v.name: dims(v) for v in graph.input if v.name not in inits}
    problems = tc.io_problems(model, shapes, {v.name: dims(v) for v in graph.output})
    ops = {n.op_type for n in graph.node} - {"Gemm"}
    gemms = sum(n.op_type == "Gemm" for n in graph.node)
    cap = spec.get("max_nodes_per_gemm")
    problems += tc.structure_problems(model, allowed_ops=tc.TILING_OPS | ops, bounds=tuple(spec["bounds"]),
                                      max_nodes=len(graph.node) - gemms + cap * gemms if cap else None)
    if problems:
        return problems
    rng = tc.rng_for(spec)
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    expected, failed = tc.run_model(original.SerializeToString(), feeds)
    if failed:
        raise RuntimeError(f"the original {spec['model']} does not run: {failed[0]}")
    actual, problems = tc.run_model(data, feeds)
    if problems:
        return problems
    for name, value in expected.items():
        problems += tc.output_problems(actual[name], value.astype(np.float64), tolerance, f"output {name!r}")
    return problems
