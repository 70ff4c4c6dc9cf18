"""``util.judging.heap.settle``: after it, what a process allocates grows its resident memory by what it allocated
(packed on new pages), not by the pages of holes ``malloc_trim`` left, and nothing the set-up freed is reusable.

Each probe runs in a fresh interpreter: the heap it measures is its own, fragmented on purpose the way a course's
set-up leaves it (many freed blocks of many sizes between blocks still held).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from grader import REPO

PROBE = """
import ctypes, json, sys
sys.path.insert(0, {repo!r})
from util.judging import heap

def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) * 1024

held = [bytearray(600 + (i * 7919) % 20000) for i in range({blocks})]  # malloc'd (over pymalloc's 512 bytes)
del held[::2]
{prepare}
free = heap.free_bytes()
before = rss()
small = [bytearray({each}) for _ in range({count})]  # what student code might allocate: small objects, touched
after_small = rss()
large = bytearray(b"\\1" * (1 << 20))
print(json.dumps({{"free": free, "small": after_small - before, "large": rss() - after_small}}))
"""


def probe(prepare: str, *, blocks: int = 6000, each: int = 1500, count: int = 40) -> dict:
    code = PROBE.format(repo=str(REPO), prepare=prepare, blocks=blocks, each=each, count=count)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
@pytest.mark.parametrize("each,count", [(1500, 40), (700, 100), (5000, 12), (12000, 5)])
def test_small_allocations_after_settling_grow_memory_by_what_they_allocate(each, count):
    found = probe("heap.settle()", each=each, count=count)
    allocated = each * count
    assert found["free"] < 64 * 1024, found  # the holes were taken: nothing freed is left to reuse
    assert found["small"] <= allocated + 48 * 1024, found  # packed on new pages (plus page rounding, headers)
    assert found["small"] >= allocated // 2, found  # and they are counted: none landed on resident free memory
    assert found["large"] >= (1 << 20) - 8 * 1024, found  # a temporary the size of what was freed costs its size


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_without_settling_freed_memory_is_reused_unseen():
    """The control: the same probe after a garbage collection only; the freed blocks are resident and reused, so
    what the small objects allocate is not counted (the measurement ``settle`` exists to prevent)."""
    found = probe("import gc; gc.collect()")
    assert found["free"] > 1 << 20, found
    assert found["small"] < 1500 * 40 // 2, found
