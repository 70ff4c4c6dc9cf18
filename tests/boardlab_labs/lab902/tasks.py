"""The leaderboard test lab: ``make_bytes(n)`` returns bytes; each case saves them and the judge (``judge.py``)
passes a file of at least ``n`` bytes, reporting its "speed" (bytes per requested byte) and its noise as facts.
2 points for the exported answer 902, 4 per case."""
from util.contract import Case, Lab, Leaderboard, Task

LAB_NAME = "lab902"


def _save(fn, spec):
    from util.artifacts import save_file

    return save_file(fn(spec["n"]), spec, LAB_NAME, ".bin")


LAB = Lab(name=LAB_NAME, title="Grader test lab with a leaderboard", notebook="lab902_board.ipynb", tasks=(
    Task(id="902.1", title="Fast bytes", answer_points=2, answer="the int 902", function="make_bytes",
         run_case=_save, cases=(Case("small", {"n": 4}, 4), Case("large", {"n": 64}, 4)),
         grader_check=f"{LAB_NAME}.judge:check_speed"),
), judge_timeout=60, leaderboard=Leaderboard("Bytes per byte asked", task="902.1", fact="speed", unit="x",
                                             band="noise"))
