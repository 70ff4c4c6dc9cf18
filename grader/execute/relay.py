"""A relay between a graded kernel and the grader that passes on only messages of bounded size.

ZeroMQ bounds the size of each *part* of a message (``MAXMSGSIZE``) but not how many parts a
message has, and it delivers a message only once all its parts have arrived. A kernel can send one
1 MiB buffer 300 times as the parts of one message (costing it 1 MiB) and make the receiver hold
300 MiB. The grader therefore never receives from a kernel directly: this small process (ZeroMQ
and the standard library, no jupyter) sits between them, under its own ``RLIMIT_DATA``, and:

* connects to the kernel's five sockets and offers the same five to the grader, at
  ``<relay prefix>-<port>`` in a folder the kernel cannot see;
* drops any message from the kernel whose parts together exceed ``max_message`` bytes or that
  has more than :data:`MAX_PARTS` parts, and counts it;
* receives at most one message at a time from the kernel, so its memory is its baseline plus one
  message. A message too large to fit at all makes it run out of memory and die; the grader then
  stops the submission (:mod:`grader.execute.watchdog`): "the notebook sent the grader more than it accepts".

It forwards the grader's requests untouched and never parses a message (the grader checks
signatures and contents itself, :class:`grader.execute.output.SafeSession`).

Run as ``python relay.py SPEC`` (SPEC: JSON with ``kernel`` (jupyter connection info), ``prefix``,
``max_frame``, ``max_message`` and ``memory``); it exits when its parent dies or the grader kills it.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import sys

MAX_PARTS = 64
"""Most parts a message may have (identities, delimiter, signature, four JSON parts, buffers)."""
CHANNELS = ("shell", "control", "stdin", "hb")
"""Request/reply channels: the grader's DEALER (REQ for hb) talks to the kernel's ROUTER (REP)."""


def main(spec: dict) -> None:
    import zmq

    resource.setrlimit(resource.RLIMIT_DATA, (spec["memory"], spec["memory"]))
    libc = ctypes.CDLL(None)
    if hasattr(libc, "prctl"):  # (Linux)
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG = SIGKILL: never outlive the grader
    kernel, prefix = spec["kernel"], spec["prefix"]
    context = zmq.Context(io_threads=1)

    def kernel_side(kind: int, port: int) -> zmq.Socket:
        socket = context.socket(kind)
        socket.setsockopt(zmq.MAXMSGSIZE, spec["max_frame"])
        socket.setsockopt(zmq.RCVHWM, 1)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(f"ipc://{kernel['ip']}-{port}")
        return socket

    def grader_side(kind: int, port: int) -> zmq.Socket:
        socket = context.socket(kind)
        socket.setsockopt(zmq.LINGER, 0)
        socket.bind(f"ipc://{prefix}-{port}")
        return socket

    routes = {}  # socket -> (socket it forwards to, whether it is the kernel's side)
    grader_ids: dict[zmq.Socket, bytes] = {}
    for name in CHANNELS:
        port = kernel[f"{name}_port"]
        towards_kernel, towards_grader = kernel_side(zmq.DEALER, port), grader_side(zmq.ROUTER, port)
        routes[towards_kernel] = (towards_grader, True)
        routes[towards_grader] = (towards_kernel, False)
    subscriber = kernel_side(zmq.SUB, kernel["iopub_port"])
    subscriber.setsockopt(zmq.SUBSCRIBE, b"")
    routes[subscriber] = (grader_side(zmq.PUB, kernel["iopub_port"]), True)
    poller = zmq.Poller()
    for socket in routes:
        poller.register(socket, zmq.POLLIN)
    print("ready", flush=True)
    while True:
        for socket, _ in poller.poll():
            parts = socket.recv_multipart(copy=False)
            target, from_kernel = routes[socket]
            if not from_kernel:  # the grader's request: remember who asked, pass it on
                grader_ids[target] = parts[0].bytes
                target.send_multipart(parts[1:], copy=False)
                continue
            if len(parts) > MAX_PARTS or sum(len(p.buffer) for p in parts) > spec["max_message"]:
                continue  # dropped: the grader never sees it
            if target.socket_type == zmq.ROUTER:
                identity = grader_ids.get(socket)
                if identity is None:
                    continue  # the kernel spoke first on a request channel: nobody to deliver to
                parts = [identity, *parts]
            target.send_multipart(parts, copy=False)


def start(connection: dict, prefix: str, *, max_frame: int, max_message: int, memory: int):  # noqa: ANN201
    """Start this relay (a process of its own) for the kernel at ``connection``, offering its sockets at
    ``prefix``; returns the ``subprocess.Popen`` once it listens (``RuntimeError`` if it does not start)."""
    import subprocess

    spec = {"kernel": {k: v for k, v in connection.items() if k == "ip" or k.endswith("_port")},
            "prefix": prefix, "max_frame": max_frame, "max_message": max_message, "memory": memory}
    # -I: the grader's PYTHONPATH (a sitecustomize importing torch, say) has no business in the relay
    process = subprocess.Popen([sys.executable, "-I", __file__, json.dumps(spec)], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
                               env={"PATH": os.environ.get("PATH", os.defpath)})
    if process.stdout.readline().strip() != "ready":
        process.kill()
        process.wait()
        raise RuntimeError("the message relay did not start")
    return process


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
