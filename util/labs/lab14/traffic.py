"""Global-memory traffic of a Triton kernel, counted exactly while Triton's interpreter runs it.

In interpreter mode (``TRITON_INTERPRET=1``, or :func:`util.labs.lab14.launch.interpreted`) every ``tl.load``
and ``tl.store`` of a kernel ends in one of two methods of Triton's interpreter builder,
``InterpreterBuilder.create_masked_load`` and ``create_masked_store``: a load or store without a mask builds an
all-true one and calls them (``create_load``, ``create_store``), and so do block pointers
(``tl.make_block_ptr``, a masked load with ``boundary_check``) and tensor descriptors. This module wraps those
two methods and only those (wrapping ``create_load`` as well would count unmasked loads twice). For every call
it counts the lanes whose mask is true, times the element's size, against the tensor the addresses fall in:
masked-off lanes move no data and count nothing. It assumes no cache between the kernel and global memory (as
the closed forms do): a tile loaded twice counts twice.

While counting it also refuses what a kernel must not do: a lane whose address lies outside every tensor the
launch was given (a ragged edge left unmasked reads the memory next to the tensor; a store there would
overwrite it) stops the kernel with :class:`OutOfBounds` before the access happens, and atomics (which go
through other builder methods, so would not be counted) raise.

Tied to Triton 3.8.0's interpreter (``requirements.txt`` pins it): :func:`install` refuses another version,
and the course's tests fail when those internals change.

Who counts what: the notebook counts its own runs with :func:`counting` (through the launchers of
:mod:`util.labs.lab14.launch`); the grader counts again in a process of its own, where the instrumentation is
installed before any kernel is compiled and the kernels are held to :mod:`util.labs.lab14.rules`.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

TRITON_VERSION = "3.8.0"
"""The Triton release whose interpreter internals this module wraps."""


class OutOfBounds(RuntimeError):
    """A kernel's load or store reached memory outside every tensor its launch was given."""


@dataclass
class Traffic:
    """Bytes a launch moved between global memory and the kernel, per tensor (by the names the launcher gave)."""

    loaded: dict[str, int] = field(default_factory=dict)
    """Tensor name -> bytes loaded from it (active lanes x element size)."""
    stored: dict[str, int] = field(default_factory=dict)
    """Tensor name -> bytes stored into it."""
    loads: int = 0
    """Number of ``tl.load`` calls the programs made (each over a whole block)."""
    stores: int = 0
    """Number of ``tl.store`` calls."""

    @property
    def loaded_bytes(self) -> int:
        """Every byte loaded, from any tensor."""
        return sum(self.loaded.values())

    @property
    def stored_bytes(self) -> int:
        """Every byte stored, into any tensor."""
        return sum(self.stored.values())

    @property
    def total_bytes(self) -> int:
        """Loaded plus stored: the traffic a roofline charges."""
        return self.loaded_bytes + self.stored_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"loaded": dict(self.loaded), "stored": dict(self.stored), "loads": self.loads, "stores": self.stores}


class _Regions:
    """The tensors of one launch: name -> [start, end) of its storage's bytes, and the counts so far."""

    def __init__(self, tensors: Mapping[str, Any]) -> None:
        self.names, self.starts, self.ends = [], [], []
        for name, tensor in tensors.items():
            if not hasattr(tensor, "untyped_storage"):
                continue
            storage = tensor.untyped_storage()
            self.names.append(name)
            self.starts.append(int(storage.data_ptr()))
            self.ends.append(int(storage.data_ptr()) + int(storage.nbytes()))
        self.traffic = Traffic({name: 0 for name in self.names}, {name: 0 for name in self.names})

    def charge(self, kind: str, addresses, mask, itemsize: int, program) -> None:
        import numpy as np

        active = np.asarray(addresses, dtype=np.uint64)[np.broadcast_to(np.asarray(mask, dtype=bool),
                                                                        np.shape(addresses))]
        inside = np.zeros(active.shape, dtype=bool)
        counts = {}
        for name, start, end in zip(self.names, self.starts, self.ends):
            here = (active >= np.uint64(start)) & (active + np.uint64(itemsize) <= np.uint64(end))
            counts[name] = int(np.count_nonzero(here))
            inside |= here
        outside = int(active.size - np.count_nonzero(inside))
        if outside:
            raise OutOfBounds(
                f"program {tuple(int(i) for i in program)} tried to {kind} {outside:,} element(s) outside every tensor "
                f"the kernel was given ({', '.join(self.names)}): mask the lanes past the edges (e.g. "
                "mask=offs < n) so that a block hanging over a tensor's end touches nothing there")
        book = self.traffic.loaded if kind == "load" else self.traffic.stored
        for name, count in counts.items():
            book[name] += count * itemsize
        if kind == "load":
            self.traffic.loads += 1
        else:
            self.traffic.stores += 1


_active: list[_Regions] = []
_installed: list[bool] = []


def _itemsize(ptrs) -> int:
    import numpy as np
    from triton.runtime.interpreter import _get_np_dtype

    return int(np.dtype(_get_np_dtype(ptrs.get_element_ty())).itemsize)


def install() -> None:
    """Wrap the interpreter's masked load and store (once per process); a no-op the second time. Raises
    ``RuntimeError`` under any Triton but :data:`TRITON_VERSION`, whose internals these wrappers rely on."""
    if _installed:
        return
    import triton
    from triton.runtime.interpreter import InterpreterBuilder

    if triton.__version__ != TRITON_VERSION:
        raise RuntimeError(f"the course counts memory traffic inside Triton {TRITON_VERSION}'s interpreter; this is "
                           f"Triton {triton.__version__}: install the version requirements.txt pins")
    load, store = InterpreterBuilder.create_masked_load, InterpreterBuilder.create_masked_store

    @functools.wraps(load)
    def create_masked_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        if _active:
            _active[-1].charge("load", ptrs.data, mask.data, _itemsize(ptrs), self.grid_idx)
        return load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)

    @functools.wraps(store)
    def create_masked_store(self, ptrs, value, mask, cache_modifier, eviction_policy):
        if _active:
            _active[-1].charge("store", ptrs.data, mask.data, _itemsize(ptrs), self.grid_idx)
        return store(self, ptrs, value, mask, cache_modifier, eviction_policy)

    def refuse_atomic(self, *args, **kwargs):
        raise NotImplementedError("atomics are not counted by the course's traffic counter, and no kernel of this "
                                  "lab needs one: use tl.load and tl.store")

    InterpreterBuilder.create_masked_load = create_masked_load
    InterpreterBuilder.create_masked_store = create_masked_store
    InterpreterBuilder.create_atomic_rmw = refuse_atomic
    InterpreterBuilder.create_atomic_cas = refuse_atomic
    _installed.append(True)


@contextlib.contextmanager
def counting(tensors: Mapping[str, Any]) -> Iterator[Traffic]:
    """Count the traffic of the interpreted launches inside the block against ``tensors`` (name -> CPU tensor:
    every tensor the kernel is given); yields the :class:`Traffic`, filled as the kernel runs.

    Every element a ``tl.load`` or ``tl.store`` moves counts its size in bytes, each time it moves, against the
    tensor its address falls in (no cache: a tile loaded twice counts twice); a lane whose mask is false moves
    nothing and counts nothing. A load or store outside all of them raises :class:`OutOfBounds` (inside Triton's
    ``InterpreterError``; the course's launchers show it unwrapped) before it happens; so do atomics."""
    install()
    regions = _Regions(tensors)
    _active.append(regions)
    try:
        yield regions.traffic
    finally:
        _active.remove(regions)
