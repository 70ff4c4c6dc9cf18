"""A student process's harness for tests of the judge's student processes (:mod:`util.student_process`):
it runs the source code it is sent (standing for a student's function) and answers ``call`` requests."""
from util.student_process import ChannelError


def serve(channel) -> None:
    """``{"code": ...}`` + source: run it (it defines ``f``); ``{"call": n}``: answer ``f(n)``."""
    namespace: dict = {}
    while True:
        try:
            header, data, _ = channel.receive()
        except ChannelError:
            return
        try:
            if "code" in header:
                exec(compile(data.decode(), "<student>", "exec"), namespace)
                channel.send({"loaded": True})
            elif "call" in header:
                channel.send({"value": namespace["f"](header["call"])})
        except Exception as exc:  # the student's code may raise anything: say so, keep serving
            channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
