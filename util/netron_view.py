"""Show an ONNX model in netron, in a way that works inside a container.

``netron.start(path)`` on its own binds to ``localhost`` on a random port, tries to open a browser
(inside a container there is none) and prints its own "Serving ..." line. Here:

* ``host`` defaults to ``$NETRON_HOST`` or ``127.0.0.1``; the student image sets ``0.0.0.0`` so
  the port published by ``docker run -p 8081:8081`` reaches it;
* ``port`` defaults to ``$NETRON_PORT`` or 8081 (JupyterLab has 8888); 0 picks a free port (the
  grader sets ``NETRON_PORT=0`` so notebooks graded side by side never compete for one);
* no browser is started and the address is printed once: open it yourself;
* a ``ModelProto`` is served from memory: no temporary file is left behind;
* the page opens straight on the graph: netron's one-time cookie notice (it asks to send usage
  statistics, which a course machine without internet cannot do anyway) is answered for you, and
  the "please update" notice a pinned netron would show months after its release never appears.

Example::

    from util.netron_view import show, stop
    url = show("outputs/labN/model.onnx")          # prints and returns http://127.0.0.1:8081
    stop()                                              # when done
"""
from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Union

HOST_ENV, PORT_ENV = "NETRON_HOST", "NETRON_PORT"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8081

_served: dict[int, tuple[object, threading.Thread]] = {}
"""Port -> (server, thread) of every model this process serves, so :func:`stop` can end them."""


def default_address() -> tuple[str, int]:
    """The ``(host, port)`` netron binds to unless told otherwise (see the module docstring)."""
    port = os.environ.get(PORT_ENV, str(DEFAULT_PORT))
    try:
        return os.environ.get(HOST_ENV, DEFAULT_HOST), int(port)
    except ValueError:
        raise ValueError(f"${PORT_ENV} must be a port number, not {port!r}") from None


def _memory_provider():
    from netron import server

    class Memory(server._ContentProvider):
        """The model's bytes, and nothing else (netron's own provider also serves the files next to it)."""

        def read(self, path):
            return self.data if path == self.base else None

    return Memory


def _Memory(data, path, file, name):  # noqa: N802 (a class made on first use: netron is imported lazily)
    return _memory_provider()(data, path, file, name)


def _handler(content):
    """netron's request handler, serving ``content``, with the page's two notices turned off."""
    from netron import server

    class Handler(server._HTTPRequestHandler):
        def _write(self, status_code, content_type, body):
            cookie = None
            if content_type == "text/html" and body:
                # the "date" meta makes netron ask for an update 180 days after its release: drop it
                body = re.sub(rb'<meta name="date" content="[^"]*">\s*', b"", body)
                cookie = f"consent={int(time.time() * 1000)}; Path=/; Max-Age=2592000; SameSite=Lax"
            self.send_response(status_code)
            if body:
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", len(body))
            if cookie:  # what netron stores once its cookie notice is accepted
                self.send_header("Set-Cookie", cookie)
            self.end_headers()
            if self.command != "HEAD":
                if status_code == 404 and body is None:
                    self.wfile.write(b"404")
                elif status_code in (200, 404) and body is not None:
                    self.wfile.write(body)

    Handler.content = content
    return Handler


def show(model: Union[str, Path, "onnx.ModelProto"], *, host: str | None = None,  # noqa: F821
         port: int | None = None, quiet: bool = False) -> str:
    """Serve ``model`` (a path or an ``onnx.ModelProto``) with netron; return its address.

    A model already served on the same port is replaced, so re-running a notebook cell works.
    A ``ModelProto`` is served from memory (as ``model.onnx``); a path is read when the page asks.
    """
    from netron import server

    default_host, default_port = default_address()
    address = (host or default_host, int(default_port if port is None else port))
    if isinstance(model, (str, Path)):
        path = Path(model)
        if not path.is_file():
            raise FileNotFoundError(f"no model at {path}: save it first (onnx.save(model, {str(path)!r}))")
        name, content = path.name, server._ContentProvider(None, str(path), str(path), str(path))
    else:
        name = "model.onnx"
        content = _Memory(bytearray(model.SerializeToString()), name, name, name)
    stop(address[1])
    httpd = server._ThreadedHTTPServer(address, _handler(content))   # port 0: the system picks a free one
    httpd.block_on_close = False
    address = (address[0], httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True,
                              name=f"netron-{address[1]}")
    thread.start()
    _served[address[1]] = (httpd, thread)
    url = f"http://{address[0]}:{address[1]}"
    if not quiet:
        shown = url.replace("0.0.0.0", "localhost")
        print(f"netron is serving {name} at {shown} (open it in your browser; stop() ends it)")
    return url


def serving() -> list[int]:
    """The ports this process serves a model on."""
    return sorted(_served)


def stop(port: int | None = None) -> None:
    """Stop the netron server on ``port``, or every one this process started."""
    for p in [port] if port is not None else list(_served):
        found = _served.pop(p, None)
        if found is not None:
            httpd, thread = found
            httpd.shutdown()        # returns once serve_forever has stopped
            httpd.server_close()    # frees the port
            thread.join(timeout=5)
