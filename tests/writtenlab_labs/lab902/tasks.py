"""The written test lab: two one-line tasks, a written question in each (one added in release 2) and a
practice question worth nothing."""
from util.contract import Lab, Release, Task, Written

LAB = Lab(name="lab902", title="Written answers test lab", notebook="lab902_written.ipynb", tasks=(
    Task(id="902.1", title="First", answer_points=3, answer="the int 41",
         written=(Written("902.Q1", "Why is the answer 41?", 2, words=(3, 40)),)),
    Task(id="902.2", title="Second", answer_points=4, answer="the int 42",
         written=(Written("902.Q2", "Why is the answer 42?", 1, words=(1, 20), since=2),
                  Written("902.P", "What would you try next?", 0))),
), releases=(
    Release(1, "2026-11-01", "The first release."),
    Release(2, "2026-11-20", "Task 902.2 asks why the answer is 42 (Q2, 1 point, graded by hand).",
            marker="Answer to Q2"),
))
