"""Shapes, sizes and lifetimes as the course computes them, an independent check of a memory plan,
and the course's own plan (the one tasks 8.3 and 8.5 execute in).

A *plan* is a dict ``{"buffer_bytes": [int, ...], "assign": {tensor: buffer id}}`` that gives every
tensor a node produces one buffer; graph inputs and initializers are not planned. A plan is
**valid** when every buffer is large enough for each tensor in it and no two tensors that are alive
at the same node share a buffer. A tensor is alive from the node that produces it through the last
node that reads it (both included); a graph output stays alive to the end. Both ends are
*inclusive*: a node's output is alive while the node reads its inputs, so a node never writes into
a buffer it reads.

``course_shapes`` asks ``onnx.shape_inference``, so the tasks that receive shapes do not depend on
your task 8.1. ``course_plan`` follows a different policy from the one task 8.2 asks for (interval
colouring: first buffer whose tenants are all dead, grown to fit), so comparing the two is fair.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import onnx


def course_shapes(model: onnx.ModelProto, input_shapes: Mapping[str, Any]) -> dict[str, list[int]]:
    """Every graph input's and node output's shape, by ``onnx.shape_inference`` (strict mode)."""
    return {name: dims for name, (dims, _) in shapes_and_sizes(model, input_shapes).items()}


def shapes_and_sizes(model: onnx.ModelProto, input_shapes: Mapping[str, Any]) -> dict[str, tuple[list[int], int]]:
    """Tensor -> (shape, element size in bytes), for graph inputs and node outputs."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for value in fixed.graph.input:
        if value.name in input_shapes:
            shape = value.type.tensor_type.shape
            shape.ClearField("dim")
            for size in input_shapes[value.name]:
                shape.dim.add().dim_value = int(size)
    graph = onnx.shape_inference.infer_shapes(fixed, strict_mode=True).graph
    wanted = {v.name for v in graph.input} | {t for node in graph.node for t in node.output if t}
    weights = {init.name for init in graph.initializer}
    out = {}
    for value in [*graph.input, *graph.output, *graph.value_info]:
        if value.name in wanted and value.name not in weights:
            tensor = value.type.tensor_type
            out[value.name] = ([d.dim_value for d in tensor.shape.dim],
                               onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).itemsize)
    return out


def tensor_nbytes(model: onnx.ModelProto, shapes: Mapping[str, Any]) -> dict[str, int]:
    """Bytes of every tensor in ``shapes``: elements x 4 (float32), or x 8 for a ``Shape`` node's int64 output."""
    int64 = {node.output[0] for node in model.graph.node if node.op_type == "Shape"}
    return {name: math.prod(shape) * (8 if name in int64 else 4) for name, shape in shapes.items()}


def lifetimes(model: onnx.ModelProto) -> dict[str, tuple[int, int]]:
    """Node output -> (first, last) node index at which it is alive (both included).

    First: the node that produces it. Last: the last node that reads it, or its producer when no
    node reads it; ``len(nodes)`` (past the last node) for a graph output.
    """
    produced: dict[str, list[int]] = {}
    for index, node in enumerate(model.graph.node):
        for name in node.input:
            if name in produced:
                produced[name][1] = index
        for name in node.output:
            if name:
                produced[name] = [index, index]
    for value in model.graph.output:
        if value.name in produced:
            produced[value.name][1] = len(model.graph.node)
    return {name: (first, last) for name, (first, last) in produced.items()}


def plan_problems(model: onnx.ModelProto, nbytes: Mapping[str, int], plan: Any, limit: int = 3) -> list[str]:
    """What makes ``plan`` invalid for ``model`` (empty: valid). ``nbytes``: tensor -> bytes.

    Checks the form (a dict with ``buffer_bytes`` and ``assign``), that every node output has a
    buffer that exists and is large enough, and that no two tensors alive at the same node share a
    buffer. At most ``limit`` problems are listed, then how many more there were.
    """
    if not isinstance(plan, Mapping) or not isinstance(plan.get("buffer_bytes"), list) \
            or not isinstance(plan.get("assign"), Mapping):
        return ["a plan is a dict {'buffer_bytes': [int, ...], 'assign': {tensor: buffer id}}"]
    sizes, assign, alive = plan["buffer_bytes"], plan["assign"], lifetimes(model)
    problems: list[str] = []
    if not all(isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in sizes):
        return ["buffer_bytes must hold whole numbers of bytes (int >= 0)"]
    tenants: dict[int, list[str]] = {}
    for name in alive:
        buffer = assign.get(name)
        if not isinstance(buffer, int) or isinstance(buffer, bool) or not 0 <= buffer < len(sizes):
            problems.append(f"{name!r} has no buffer" if buffer is None else
                            f"{name!r} is assigned buffer {buffer!r}; the plan has buffers 0..{len(sizes) - 1}")
            continue
        if sizes[buffer] < nbytes[name]:
            problems.append(f"{name!r} needs {nbytes[name]:,} bytes; buffer {buffer} holds {sizes[buffer]:,}")
        tenants.setdefault(buffer, []).append(name)
    problems += [f"{name!r} is not a tensor any node produces" for name in assign if name not in alive]
    for buffer, names in sorted(tenants.items()):
        names.sort(key=lambda name: alive[name])
        for i, first in enumerate(names):
            for second in names[i + 1:]:
                if alive[second][0] <= alive[first][1]:
                    problems.append(f"{first!r} (alive at nodes {alive[first][0]}..{alive[first][1]}) and "
                                    f"{second!r} (alive at {alive[second][0]}..{alive[second][1]}) share buffer "
                                    f"{buffer}")
    if len(problems) > limit:
        problems = problems[:limit] + [f"... and {len(problems) - limit} more"]
    return problems


def course_plan(model: onnx.ModelProto, shapes: Mapping[str, Any]) -> dict[str, Any]:
    """A valid plan by interval colouring: in production order, each tensor takes the first buffer
    whose tenants are all dead before it is produced (the buffer grows to fit); graph outputs get a
    buffer of their own."""
    alive, nbytes = lifetimes(model), tensor_nbytes(model, shapes)
    outputs = {value.name for value in model.graph.output}
    sizes: list[int] = []
    tenants: list[list[str]] = []
    assign: dict[str, int] = {}
    for name in sorted(alive, key=lambda tensor: alive[tensor][0]):
        free = None if name in outputs else next(
            (b for b, names in enumerate(tenants)
             if all(other not in outputs and alive[other][1] < alive[name][0] for other in names)), None)
        if free is None:
            sizes.append(0)
            tenants.append([])
            free = len(sizes) - 1
        sizes[free] = max(sizes[free], nbytes[name])
        tenants[free].append(name)
        assign[name] = free
    return {"buffer_bytes": sizes, "assign": assign}


def summarize_plan(model: onnx.ModelProto, shapes: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, Any]:
    """``{naive_bytes, planned_bytes, buffers, buffer_bytes}``: one buffer per tensor vs the plan."""
    nbytes = tensor_nbytes(model, shapes)
    sizes = [int(size) for size in plan["buffer_bytes"]]
    return {"naive_bytes": sum(nbytes[name] for name in lifetimes(model)), "planned_bytes": sum(sizes),
            "buffers": len(sizes), "buffer_bytes": sizes}
