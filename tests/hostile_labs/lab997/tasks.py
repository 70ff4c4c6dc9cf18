"""The hostile-data test lab: an honest integer, a float within a tolerance, and a function the grader
calls on a hidden and a shown case: 100 points, so a clean solution's 100/100 is checked in the same
batch as the hostile submissions. References: 997.1 = 41, 997.2 = 2.5, 997.3 = 6, f(n) = n * n."""
from util.contract import Case, Lab, Task, Tolerance


def _call(function, spec):
    return function(spec["n"])


LAB = Lab(name="lab997", title="Hostile data test lab", notebook="lab997_hostile.ipynb", tasks=(
    Task(id="997.1", title="Honest", answer_points=20, answer="the int 41"),
    Task(id="997.2", title="Float", answer_points=20, answer="the float 2.5", tolerance=Tolerance(rtol=1e-6)),
    Task(id="997.3", title="Function", answer_points=30, answer="the int 6", function="f", run_case=_call,
         cases=(Case("small", {"n": 2}, 20), Case("shown", {"n": 3}, 10, hidden=False))),
), cell_timeout=20, notebook_timeout=90)
