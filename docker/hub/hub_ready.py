#!/usr/bin/env python3
"""Whether the class server came up, part by part, and if not, which part did not and what to do.

``docker/hub/hub.sh start`` runs it on the host once the hub's container is started. The hub starts its parts in
this order, and each is waited for until the one deadline (``--timeout``, ``COURSE_HUB_START_TIMEOUT``):

1. the proxy (configurable-http-proxy, a node process): the public port students' browsers reach;
2. the hub's API (JupyterHub itself) on the students' network's gateway, where their servers reach it;
3. the hand-in receiver (``handin_service.py``, a service the hub starts) beside it;
4. the hub answering through the proxy (``/hub/api``): what a student's browser sees.

Every second or so it also asks whether the hub's container still runs (``--state-cmd``). Exit 0 when all four
answer (one line each, with the seconds it took); 3 when the container stopped first (``hub.sh`` may start it
again); 4 when the deadline passed with the container running. Either failure names the first part that did not
answer, what its lines in the hub's log say (``--logs-cmd``) and what to do.

Standard library only: it runs with the host's ``python3``.

    python3 hub_ready.py --public http://127.0.0.1:8000 --api http://172.31.77.1:8081 \\
        --handin http://172.31.77.1:8082 --timeout 300 --state-cmd 'docker inspect ...' --logs-cmd 'docker logs ...'
"""
from __future__ import annotations

import argparse
import http.client
import re
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

READY, EXITED, TIMED_OUT = 0, 3, 4


@dataclass(frozen=True)
class Part:
    """One part of the hub's start-up: where it answers and what to do when it does not."""

    name: str
    url: str
    http: bool
    """True: an HTTP answer is needed (see :attr:`exact`); False: a connection is enough."""
    log: re.Pattern
    """The hub's log lines about this part."""
    advice: str
    exact: bool = False
    """With :attr:`http`: only 200 will do (JupyterHub's ``/hub/api``, not another server's 404); else any status
    below 500 (the hand-in receiver refuses a request without a token: it is up)."""


def parts(public: str, api: str, handin: str, timeout: int) -> list[Part]:
    """The four parts, in the order the hub starts them."""
    port = urlsplit(public).port
    more = f"raise COURSE_HUB_START_TIMEOUT (now {timeout} s), or run start again when the load is lower"
    return [
        Part("the proxy (configurable-http-proxy)", public, False,
             re.compile(r"proxy|configurable-http-proxy|8001", re.I),
             f"the machine is too busy for node to start in time, or port {port} is taken (ss -ltnp 'sport = :{port}'): "
             + more),
        Part("the hub's API (JupyterHub)", api.rstrip("/") + "/hub/api", True,
             re.compile(r"Hub API|bind|database|sqlite|Traceback|Error", re.I),
             f"JupyterHub did not get as far as listening at {api}: its log says why (a port taken, the database, "
             "the config); else " + more, exact=True),
        Part("the hand-in receiver (handin_service.py)", handin.rstrip("/") + "/handin", True,
             re.compile(r"handin", re.I),
             "students could not hand in: its log lines say why (the collection folder's permissions, its port "
             f"{urlsplit(handin).port} taken); else " + more),
        Part("the hub through the proxy (what students' browsers reach)", public.rstrip("/") + "/hub/api", True,
             re.compile(r"proxy|route|50[234]", re.I),
             f"the proxy answers but does not route to the hub (or another server holds port {port}): its log says "
             "why; else " + more, exact=True),
    ]


def answers(part: Part, wait: float = 2.0) -> bool:
    """Whether ``part`` answers now (a connection, or the HTTP status it needs), within ``wait`` seconds."""
    where = urlsplit(part.url)
    try:
        if not part.http:
            with socket.create_connection((where.hostname, where.port), timeout=wait):
                return True
        connection = http.client.HTTPConnection(where.hostname, where.port, timeout=wait)
        try:
            connection.request("GET", where.path or "/")
            status = connection.getresponse().status
            return status == 200 if part.exact else status < 500
        finally:
            connection.close()
    except (OSError, http.client.HTTPException):
        return False


def _run(command: str) -> str:
    if not command:
        return ""
    try:
        done = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({command} failed: {exc})"
    return done.stdout + done.stderr


def diagnosis(part: Part, why: str, log: str, lines: int = 8) -> str:
    """What to say when ``part`` did not answer: which, why, its log lines (else the log's end), what to do."""
    log_lines = log.splitlines()
    about = [line for line in log_lines if part.log.search(line)][-lines:] or log_lines[-lines:]
    shown = "\n".join("    " + line for line in about) or "    (the log is empty)"
    return (f"{part.name} did not answer at {part.url}: {why}.\nThe hub's log about it:\n{shown}\n"
            f"What to do: {part.advice}.")


def wait(todo: list[Part], timeout: float, state_cmd: str, logs_cmd: str, poll: float = 0.5,
         say=print) -> int:
    """Wait until every part answers, the container stops or ``timeout`` seconds pass; see the module's docstring."""
    started = time.monotonic()
    left = list(todo)
    while left:
        part = left[0]
        if answers(part):
            say(f"hub_ready: {part.name} answered after {time.monotonic() - started:.1f} s")
            left.pop(0)
            continue
        state = _run(state_cmd).strip() if state_cmd else "running"
        elapsed = time.monotonic() - started
        if state not in ("running", "true"):
            say(diagnosis(part, f"the hub's container stopped ({state or 'gone'}) after {elapsed:.0f} s", _run(logs_cmd)))
            return EXITED
        if elapsed >= timeout:
            say(diagnosis(part, f"not within {timeout:.0f} s, the hub's container still running", _run(logs_cmd)))
            return TIMED_OUT
        time.sleep(poll)
    return READY


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--public", required=True, help="the hub's address for browsers (the proxy)")
    p.add_argument("--api", required=True, help="the hub's API, as the students' servers reach it")
    p.add_argument("--handin", required=True, help="the hand-in receiver")
    p.add_argument("--timeout", type=float, default=300, help="seconds for all of it (default 300)")
    p.add_argument("--state-cmd", default="", help="prints 'running' (or 'true') while the hub's container runs")
    p.add_argument("--logs-cmd", default="", help="prints the end of the hub's log")
    args = p.parse_args(argv)
    todo = parts(args.public, args.api, args.handin, int(args.timeout))
    return wait(todo, args.timeout, args.state_cmd, args.logs_cmd, say=lambda line: print(line, file=sys.stderr))


if __name__ == "__main__":
    sys.exit(main())
