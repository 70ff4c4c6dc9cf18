"""A test lab whose one answer is read from the export cache its ``prepare`` hook fills, as a lab's
notebook reads a model the grader exported: a tampered cache file changes the answer."""
import os

from util import export_cache
from util.contract import Lab, Task

FILE = "answer.bin"
"""The cache file (kind ``onnx``) that holds the answer, 42."""


def prepare() -> None:
    """Export the answer the way a course lab's hook exports a model (a plain write, no record), and
    leave the cache writable by anyone: what the sandbox's read-only view is there to make harmless."""
    folder = export_cache.writable_dir("onnx")
    if not (folder / FILE).exists():
        (folder / FILE).write_bytes(b"42")
    os.chmod(folder, 0o777)
    os.chmod(folder / FILE, 0o666)


LAB = Lab(name="lab998", title="Cache test lab", notebook="lab998_cache.ipynb", prepare="lab998.tasks:prepare", tasks=(
    Task(id="998.1", title="From the cache", answer_points=1, answer="the int in the cache"),
))
