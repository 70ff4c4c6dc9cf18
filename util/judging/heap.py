"""A student process's heap made ready for a peak-memory measurement: what was freed is neither resident nor
reusable, so what student code allocates next lands on fresh pages, packed.

A judge that charges student code with the growth of its process's peak resident memory (a re-run of a
student's function inside a memory plan) first lets the course's set-up free what it no longer needs. Two ways of doing that measure wrong:

* keep the freed memory resident: student code reuses it unseen (a temporary of the size of what the set-up
  freed costs nothing);
* give it back with ``malloc_trim``: glibc returns the pages of every free chunk inside the heap to the kernel
  but keeps the chunks for later allocations, so the heap is full of holes. The first small objects student code
  allocates (unpickling a function, a dictionary, a few strings) are scattered over those holes and fault in a
  whole page each: a few tens of KiB allocated grew the process by 896 KiB, and by how much depended on what the
  set-up happened to free (adding a task elsewhere in the course changed it).

:func:`settle` does both halves of the right thing: it gives the free pages back, then takes every free chunk of
the heap itself (allocated and never touched, so it costs no resident memory) and keeps it until the process
ends. The next allocation comes from the top of the heap, on pages no one has touched, one after the other:
growth is what was allocated, rounded up to pages. glibc only (Linux); elsewhere it only collects garbage.
"""
from __future__ import annotations

import ctypes
import gc
import sys

SMALLEST = 32
"""Free chunks smaller than this (bytes) are left free: each holds less than a page, and is at most a few bytes
of someone's next allocation."""

PASSES = 8
"""At most this many searches of the free chunks (each takes what the last left)."""

_held: list[int] = []
"""The free chunks :func:`settle` took, kept (as addresses) for the process's lifetime."""


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _Mallinfo2
        libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):  # not glibc, or a glibc older than 2.33 (no mallinfo2)
        return None
    return libc


def free_bytes() -> int:
    """Bytes in the heap's free chunks, its top excluded (``mallinfo2``: ``fordblks - keepcost``); 0 where that
    cannot be read."""
    libc = _libc()
    if libc is None:
        return 0
    info = libc.mallinfo2()
    return max(0, int(info.fordblks) - int(info.keepcost))


def settle() -> int:
    """Collect garbage, give every free page of the heap back to the kernel, then hold every free chunk of at
    least :data:`SMALLEST` bytes (see the module's help). Returns the bytes it took (free chunks, and what the
    search took from the heap's top on the way: untouched). Call it once, in the student process, after the course's set-up and before the peak is
    restarted; nothing it holds is ever freed."""
    gc.collect()
    libc = _libc()
    if libc is None:
        return 0
    libc.malloc_trim(0)  # the pages of free chunks go back; the chunks stay, as holes
    taken = 0
    for _ in range(PASSES):  # a pass ends at the first size the heap grew for; what it left, the next one takes
        found = _take(libc)
        taken += found
        if not found or free_bytes() < SMALLEST * 64:
            break
    return taken


def _take(libc) -> int:
    """One pass of :func:`settle`'s search, sizes halving from the largest power of two the free bytes allow."""
    taken, size = 0, 1 << max(0, min(24, free_bytes().bit_length() - 1))
    while size >= SMALLEST:
        info = libc.mallinfo2()
        if int(info.fordblks) - int(info.keepcost) < size:
            size //= 2
            continue
        address = libc.malloc(size)
        if not address:
            break
        _held.append(address)  # kept whatever it came from: freeing it would make it reusable again
        now = libc.mallinfo2()
        if now.arena != info.arena or now.hblkhd != info.hblkhd:
            size //= 2  # no free chunk that large is left: the heap grew for it (new, untouched pages) or it got
            continue    # its own mapping; kept all the same (untouched: address space, about twice the free bytes)
        taken += size  # a free chunk's (or glibc's cache of freed ones): no longer anyone's to reuse
    return taken
