"""The gradebooks rewritten while a class grades (``grader/grade/batch.py``, ``Rewrites``): after every submission
while a rewrite is cheap, less often once a large class makes it dear, so the main process's share of the run stays
bounded (rewriting a class of 256 after every submission cost the main process about 180 s)."""
from __future__ import annotations

from grader.grade.batch import REWRITE_SHARE, Rewrites


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_cheap_rewrite_runs_after_every_submission():
    clock, runs = Clock(), []
    rewrite = Rewrites(lambda: runs.append(clock.now), clock=clock)
    for second in range(10):   # a submission a second, each rewrite instant
        clock.now = float(second)
        assert rewrite()
    assert runs == [float(s) for s in range(10)] and rewrite.skipped == 0


def test_a_dear_rewrite_waits_so_that_it_takes_at_most_its_share_of_the_time():
    clock, runs = Clock(), []

    def dear():
        runs.append(clock.now)
        clock.now += 0.7   # a class of 256, as measured

    rewrite = Rewrites(dear, clock=clock)
    finished = 0
    while clock.now < 300:   # submissions finishing every 0.5 s for 300 s (-j 16 or so)
        rewrite()
        finished += 1
        clock.now += 0.5
    assert runs[0] == 0.0 and all(b - a >= 0.7 / REWRITE_SHARE for a, b in zip(runs, runs[1:])), runs
    assert rewrite.seconds <= REWRITE_SHARE * 300 + 0.7, rewrite.seconds   # its share, give or take the last
    assert rewrite.runs + rewrite.skipped == finished and rewrite.skipped > 10 * rewrite.runs
