"""What a graded Triton kernel may be written with: Triton's language, and nothing else of Python's.

The grader counts a kernel's traffic by running it in Triton's interpreter, where a ``@triton.jit`` function's
body is ordinary Python. So before it runs a kernel, the grader reads its source and refuses any that could
reach past the kernel language (the counter, the interpreter, a file, a module): :func:`kernel_problems` lists
the rules and what is wrong with a source, in words; :func:`kernel_source` is how the grader takes a kernel's
source from the notebook.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, Sequence

TL_NAMES = frozenset({
    # programs and index ranges
    "program_id", "num_programs", "arange", "cdiv", "static_range", "range", "multiple_of", "max_contiguous",
    # global memory
    "load", "store", "make_block_ptr", "advance",
    # building and shaping blocks
    "zeros", "zeros_like", "full", "full_like", "broadcast_to", "expand_dims", "reshape", "trans", "permute",
    "view", "join", "split", "cat",
    # arithmetic and math
    "dot", "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "abs", "fma", "maximum", "minimum", "clamp",
    "where", "fdiv", "div_rn", "sigmoid", "softmax", "erf", "floor", "ceil", "cos", "sin",
    # reductions and scans
    "sum", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "reduce", "xor_sum",
    # types
    "constexpr", "cast", "float32", "float16", "bfloat16", "float64", "int1", "int8", "int16", "int32", "int64",
    "uint8", "uint32", "uint64",
    # checks at trace time
    "static_assert", "debug_barrier",
})
"""The ``tl.<name>`` a graded kernel may use."""
METHODS = frozenset({"to", "T", "reshape", "trans", "permute", "broadcast_to", "expand_dims", "dtype", "shape"})
"""Attributes a kernel may take of a value that is not ``tl`` (its tensors, its dtypes)."""
BUILTINS = frozenset({"range", "min", "max", "abs", "float", "int", "len"})
"""Python builtins a kernel may call."""

_STATEMENTS = (ast.Assign, ast.AugAssign, ast.For, ast.While, ast.If, ast.Pass, ast.Return, ast.Expr, ast.Break,
               ast.Continue)
_EXPRESSIONS = (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.Name, ast.Attribute,
                ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.Constant, ast.keyword)
_CONTEXT = (ast.Load, ast.Store, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
_WHY = {ast.Lambda: "a lambda", ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
        ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator expression", ast.JoinedStr: "an f-string",
        ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Import: "an import", ast.ImportFrom: "an import",
        ast.With: "with", ast.Try: "try", ast.Raise: "raise", ast.FunctionDef: "a nested function",
        ast.ClassDef: "a class", ast.Dict: "a dict", ast.Set: "a set", ast.Starred: "*unpacking",
        ast.NamedExpr: "the walrus operator :=", ast.Delete: "del", ast.Assert: "assert",
        ast.AnnAssign: "an annotated assignment", ast.Await: "await", ast.Yield: "yield"}


def kernel_source(kernel: Any) -> str:
    """The source of a ``@triton.jit`` kernel (or a plain function), decorators included, dedented: what the
    grader saves from the notebook and judges. Raises ``TypeError`` when ``kernel`` has no Python source."""
    fn = getattr(kernel, "fn", kernel)
    if not inspect.isfunction(fn):
        raise TypeError(f"expected a @triton.jit kernel, got a {type(kernel).__name__}")
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise TypeError(f"the source of {fn.__name__} cannot be read ({exc}): define the kernel in a notebook "
                        "cell with def, under @triton.jit") from None


def _where(node: ast.AST) -> str:
    return f"line {getattr(node, 'lineno', '?')}"


def _is_tl(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "tl"


def _is_jit(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "jit" and isinstance(node.value, ast.Name)
            and node.value.id == "triton")


def _is_constexpr(node: ast.AST | None) -> bool:
    return node is None or (isinstance(node, ast.Attribute) and node.attr == "constexpr" and _is_tl(node.value))


def kernel_problems(source: str, name: str, parameters: Sequence[str]) -> list[str]:
    """What keeps the grader from running ``source`` as the kernel ``name(parameters...)``, in words; empty when it
    may. Reads the source only: nothing of it runs here. A graded kernel is run alone, from its own source:

    * one function, decorated with ``@triton.jit`` (or nothing), with the parameters the task states (names and
      order), each annotated ``tl.constexpr`` or not at all, and no default values;
    * a body of assignments (``x = ...``, ``x += ...``, tuple unpacking), ``for`` loops over ``range``,
      ``tl.range`` or ``tl.static_range``, ``while``, ``if``/``else``, ``pass``, ``break``, ``continue``, a bare
      ``return`` and a docstring;
    * names: the parameters, the body's own variables, ``tl`` and the builtins ``range``, ``min``, ``max``,
      ``abs``, ``float``, ``int`` and ``len``; never a name that starts with ``_``;
    * ``tl.<name>`` for the names in :data:`TL_NAMES` (loads and stores, ``tl.dot``, reductions, elementwise math,
      ``tl.arange``, ``tl.zeros``, ``tl.full``, ``tl.where``, block pointers, dtypes, ...); on any other value only
      the attributes in :data:`METHODS` (``x.to(tl.float32)``, ``x.T``, ...);
    * numbers, strings, ``None``, ``True``, ``False``, indexing and slicing (``offs[:, None]``), tuples, and a
      list only as a call's argument (a shape: ``tl.zeros([BLOCK_M, BLOCK_N], ...)``);
    * assignments to names only (``x = ...``, ``a, b = ...``): a GPU kernel's values are immutable, so nothing is
      assigned to an attribute or an element (``x_ptr.dtype = ...``, ``x[0] = ...``), which in the interpreter
      would leave a value where another program could find it.

    A Python list elsewhere (``held = [s]``, ``held + [s]``) lives only in the interpreter: on a GPU a kernel holds
    its blocks in tensors. The grader also compiles every kernel with Triton's own compiler for a GPU
    (:mod:`util.labs.lab14.gpu`), which refuses what only the interpreter can run.

    Not allowed: calling another ``@triton.jit`` function (write helpers inline), atomics (their traffic is not
    counted), printing, imports, ``lambda``, comprehensions, f-strings, ``global``, ``with``, ``try``, ``raise``,
    nested functions and classes.

    >>> kernel_problems("def k(x_ptr):\\n    import os\\n", "k", ["x_ptr"])
    ['an import is not allowed in a graded kernel (line 2)']
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"the kernel's source does not parse: {exc.msg} (line {exc.lineno})"]
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return [f"the source of {name} must be one function definition and nothing else"]
    fn = tree.body[0]
    problems: list[str] = []
    if fn.name != name:
        problems.append(f"the kernel is called {fn.name}; the task asks for {name}")
    if any(not _is_jit(d) for d in fn.decorator_list):
        problems.append(f"{name} may be decorated with @triton.jit only")
    args = fn.args
    found = [a.arg for a in args.args]
    if args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults or list(found) != list(parameters):
        problems.append(f"{name} must take exactly ({', '.join(parameters)}), in that order, without defaults; "
                        f"it takes ({', '.join(found)})")
    for arg in args.args:
        if not _is_constexpr(arg.annotation):
            problems.append(f"parameter {arg.arg} may be annotated tl.constexpr or not at all ({_where(arg)})")
    if fn.returns is not None:
        problems.append(f"{name} may not declare a return annotation")
    stored = {a.arg for a in args.args}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stored.add(node.id)
    for node in fn.body:
        problems += _statement(node, stored, top=True)
    return list(dict.fromkeys(problems))[:10]


def _statement(node: ast.AST, names: set[str], top: bool = False) -> list[str]:
    if type(node) in _WHY:
        return [f"{_WHY[type(node)]} is not allowed in a graded kernel ({_where(node)})"]
    if not isinstance(node, _STATEMENTS):
        return [f"a {type(node).__name__} statement is not allowed in a graded kernel ({_where(node)})"]
    problems: list[str] = []
    if isinstance(node, ast.Return) and node.value is not None:
        problems.append(f"a kernel returns nothing: store its results with tl.store ({_where(node)})")
    if isinstance(node, ast.Expr) and not isinstance(node.value, (ast.Call, ast.Constant)):
        problems.append(f"an expression that does nothing ({_where(node)})")
    if isinstance(node, ast.For):
        if node.orelse:
            problems.append(f"for ... else is not allowed ({_where(node)})")
        if not (isinstance(node.iter, ast.Call) and (
                (isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range")
                or (isinstance(node.iter.func, ast.Attribute) and _is_tl(node.iter.func.value)
                    and node.iter.func.attr in ("range", "static_range")))):
            problems.append(f"a for loop runs over range(...), tl.range(...) or tl.static_range(...) ({_where(node)})")
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, (ast.AugAssign, ast.For)) else []
    for target in targets:
        problems += _target(target)
    if isinstance(node, ast.While) and node.orelse:
        problems.append(f"while ... else is not allowed ({_where(node)})")
    for field_name, value in ast.iter_fields(node):
        children = value if isinstance(value, list) else [value]
        for child in children:
            if not isinstance(child, ast.AST):
                continue
            if field_name in ("body", "orelse"):
                problems += _statement(child, names)
            else:
                problems += _expression(child, names)
    return problems


def _target(node: ast.AST) -> list[str]:
    """What is wrong with an assignment's target: only names, or tuples of names, may be assigned."""
    if isinstance(node, ast.Name):
        return []
    if isinstance(node, ast.Tuple):
        return [problem for element in node.elts for problem in _target(element)]
    what = {ast.Attribute: "an attribute", ast.Subscript: "an element"}.get(type(node), "this target")
    return [f"assigning to {what} is not allowed ({_where(node)}): a kernel's values are immutable on a GPU, so "
            "assign a new name (x = ...) instead"]


def _expression(node: ast.AST, names: set[str], argument: bool = False) -> list[str]:
    if type(node) in _WHY:
        return [f"{_WHY[type(node)]} is not allowed in a graded kernel ({_where(node)})"]
    if isinstance(node, _CONTEXT):
        return []
    if not isinstance(node, _EXPRESSIONS):
        return [f"{type(node).__name__} is not allowed in a graded kernel ({_where(node)})"]
    problems: list[str] = []
    if isinstance(node, ast.Name):
        if node.id.startswith("_"):
            problems.append(f"names starting with _ are not allowed ({node.id}, {_where(node)})")
        elif isinstance(node.ctx, ast.Store) and node.id in BUILTINS | {"tl", "triton"}:
            problems.append(f"{node.id} may not be assigned in a kernel ({_where(node)})")
        elif isinstance(node.ctx, ast.Load) and node.id not in names | BUILTINS | {"tl"}:
            problems.append(f"{node.id} is not a parameter or a variable of the kernel, nor tl or an allowed builtin "
                            f"({_where(node)}): a graded kernel is run alone, so write helpers inline")
        return problems
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            return [f"attributes starting with _ are not allowed (.{node.attr}, {_where(node)})"]
        if _is_tl(node.value):
            if node.attr not in TL_NAMES:
                why = " (atomics are not counted)" if node.attr.startswith("atomic") else ""
                problems.append(f"tl.{node.attr} is not among the tl functions a graded kernel may use{why} "
                                f"({_where(node)})")
            return problems
        if node.attr not in METHODS:
            problems.append(f".{node.attr} is not allowed in a graded kernel ({_where(node)}); allowed on values: "
                            + ", ".join(sorted(METHODS)))
        return problems + _expression(node.value, names)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id not in BUILTINS:
            problems.append(f"{func.id}(...) cannot be called in a graded kernel ({_where(node)}): only tl functions "
                            f"and {', '.join(sorted(BUILTINS))}")
        if any(k.arg is None for k in node.keywords):
            problems.append(f"**keyword unpacking is not allowed ({_where(node)})")
    if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool, type(None))):
        problems.append(f"the constant {node.value!r} is not allowed ({_where(node)})")
    if isinstance(node, ast.List) and not argument:
        problems.append(f"a Python list is allowed only as a call's argument (a shape, {_where(node)}): a list lives "
                        "only in the interpreter, a GPU kernel holds its blocks in tensors (tl.zeros, tl.join, ...)")
    shapes = node.args if isinstance(node, ast.Call) else [node.value] if isinstance(node, ast.keyword) else []
    for child in ast.iter_child_nodes(node):
        problems += _expression(child, names, argument=any(child is shape for shape in shapes))
    return problems
