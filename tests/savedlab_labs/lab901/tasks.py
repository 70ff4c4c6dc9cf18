"""The tiny saved-file lab's declaration: ``make_bytes(n)`` returns ``n`` bytes; each hidden case saves
them (``util.artifacts.save_file``) and the grader's check (``judge.py``, in a judge
process) passes files of at least 4 bytes. 2 points for the exported answer 901, 4 per case."""
from util.contract import Case, Lab, Task

LAB_NAME = "lab901"
SUFFIX = ".bin"


def _save(fn, spec):
    from util.artifacts import save_file

    return save_file(fn(spec["n"]), spec, LAB_NAME, SUFFIX)


LAB = Lab(name=LAB_NAME, title="Grader test lab with saved files", notebook="lab901_files.ipynb", tasks=(
    Task(id="901.1", title="Saved bytes", answer_points=2, answer="the int 901", function="make_bytes",
         run_case=_save, cases=(Case("small", {"n": 4}, 4), Case("large", {"n": 64}, 4)),
         grader_check=f"{LAB_NAME}.judge:check_size"),
), judge_timeout=60)
