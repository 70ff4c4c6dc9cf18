"""A test lab whose one answer is read from the export cache its ``prepare`` hook fills, as a lab's
notebook reads a model the grader exported: a tampered cache file changes the answer."""
from util import export_cache
from util.contract import Lab, Task

FILE = "answer.bin"
"""The cache file (kind ``onnx``) that holds the answer, 42."""


def prepare() -> None:
    """Fill the cache, as a course lab's hook exports its models."""
    if export_cache.find("onnx", FILE) is None:
        export_cache.store("onnx", FILE, lambda path: path.write_bytes(b"42"))


LAB = Lab(name="lab98", title="Cache test lab", notebook="lab98_cache.ipynb", prepare="lab98.tasks:prepare", tasks=(
    Task(id="98.1", title="From the cache", points=1, answer="the int in the cache"),
))
