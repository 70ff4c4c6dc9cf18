"""Grader-side checks for tests of the judge process (``grader.judge.isolated``): what a file's bytes
make them do stands for what a hostile model can make a real check (onnxruntime, a compiler) do."""
import os
import subprocess
import sys
import time


def check_size(spec, data, tolerance):
    """At least 4 bytes passes; some contents make the check misbehave as a hostile file could."""
    if data == b"boom":
        raise RuntimeError("hostile bytes")
    if data == b"crash":
        import ctypes
        ctypes.string_at(0)  # a segmentation fault, as a bug in a C library would give
    if data == b"hang":
        while True:
            time.sleep(0.1)
    if data == b"bloat":
        hoard = []
        while True:
            hoard.append(bytearray(64 << 20))
    if data == b"child":  # a check that starts a process of its own (a compiler, a timing harness)
        done = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, timeout=60)
        return [] if done.stdout.strip() == "42" else [f"the child said {done.stdout!r}"]
    if data == b"noise":
        print("chatter on stdout")  # must not corrupt the judge's answers
        os.write(1, b"{not json\n")
        return []
    if data == b"many":
        return [f"problem {i}: " + "x" * 5000 for i in range(1000)]  # bounded by the judge
    return [] if len(data) >= 4 else [f"only {len(data)} bytes"]
