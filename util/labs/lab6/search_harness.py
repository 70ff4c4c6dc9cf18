"""The student's side of the grader's replay of task 6.3's search, in a student process.

The grader's judge does not trust a search that ran in the student's kernel to have kept its budget:
it replays the student's ``search_input`` (saved by the hidden case, pickled with cloudpickle) in a
student process the grader starts (:mod:`util.student_process`), with a seed of the grader's. The
error function the search receives here is a stand-in: each call sends ``x`` to the judge, which
evaluates it with its own :class:`util.labs.lab6.search.ErrorFunction`, counts it, and refuses past
the budget. The judge decides on the input the replay returns.
"""
from __future__ import annotations

import numpy as np

from util.labs.lab6.search import BudgetExceeded
from util.student_process import Channel, ChannelError


class RemoteErrorFunction:
    """``error_fn(x) -> float`` evaluated by the judge (see the module's docstring); ``calls`` counts them."""

    def __init__(self, channel: Channel, shape: tuple[int, ...], low: float, high: float, budget: int) -> None:
        self.channel, self.shape, self.low, self.high, self.budget = channel, tuple(shape), low, high, budget
        self.calls = 0

    def __call__(self, x) -> float:
        array = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
        self.channel.send({"evaluate": list(array.shape)}, data=array.tobytes())
        reply, _, _ = self.channel.receive()
        if "error" in reply and isinstance(reply["error"], float):
            self.calls += 1
            return reply["error"]
        if reply.get("refused") == "budget":
            raise BudgetExceeded(f"the error function was called more than its budget of {self.budget} times; "
                                 "keep count of your calls")
        raise ValueError(str(reply.get("refused", "the input was refused")))

    def validate(self, x) -> np.ndarray:
        """``x`` as float32 (the judge checks its shape and range)."""
        return np.asarray(x, dtype=np.float32)


def serve(channel: Channel) -> None:
    """``{"search": [shape, low, high, budget, seed]}`` + the pickled function: run it, answer evaluations,
    then send ``{"result": shape}`` + the input it returned (or ``{"raised": message}``)."""
    try:
        header, data, _ = channel.receive()
    except ChannelError:
        return
    import cloudpickle

    shape, low, high, budget, seed = header["search"]
    try:
        search = cloudpickle.loads(data)
        error_fn = RemoteErrorFunction(channel, tuple(shape), float(low), float(high), int(budget))
        x = np.ascontiguousarray(np.asarray(search(error_fn, tuple(shape), low, high, budget, seed), dtype=np.float32))
    except Exception as exc:  # the student's code may raise anything: say what, as the kernel would
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    channel.send({"result": list(x.shape)}, data=x.tobytes())
