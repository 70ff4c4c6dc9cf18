"""Show an ONNX model in netron, in a way that works inside a container.

``netron.start(path)`` on its own binds to ``localhost`` on a random port and tries to open a
browser, which inside a container is unreachable and fails. Here the address is explicit:

* ``host`` defaults to ``$NETRON_HOST`` or ``127.0.0.1``; the student image sets ``0.0.0.0`` so
  the port published by ``docker run -p 8081:8081`` reaches it;
* ``port`` defaults to ``$NETRON_PORT`` or 8081 (JupyterLab has 8888); 0 picks a free port (the
  grader sets ``NETRON_PORT=0`` so notebooks graded side by side never compete for one);
* no browser is started: open the printed address yourself.

Example::

    from util.netron_view import show, stop
    url = show("outputs/labN/model.onnx")          # prints and returns http://127.0.0.1:8081
    stop()                                              # when done
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Union

HOST_ENV, PORT_ENV = "NETRON_HOST", "NETRON_PORT"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8081

_served: dict[int, tuple[str, int]] = {}
"""Port -> address of every model this process serves, so :func:`stop` can end them."""


def default_address() -> tuple[str, int]:
    """The ``(host, port)`` netron binds to unless told otherwise (see the module docstring)."""
    port = os.environ.get(PORT_ENV, str(DEFAULT_PORT))
    try:
        return os.environ.get(HOST_ENV, DEFAULT_HOST), int(port)
    except ValueError:
        raise ValueError(f"${PORT_ENV} must be a port number, not {port!r}") from None


def show(model: Union[str, Path, "onnx.ModelProto"], *, host: str | None = None,  # noqa: F821
         port: int | None = None, quiet: bool = False) -> str:
    """Serve ``model`` (a path or an ``onnx.ModelProto``) with netron; return its address.

    A model already served on the same port is replaced, so re-running a notebook cell works.
    ``model`` as a ``ModelProto`` is saved to a temporary ``.onnx`` file first.
    """
    import netron

    default_host, default_port = default_address()
    address = (host or default_host, int(default_port if port is None else port))
    if not isinstance(model, (str, Path)):
        import onnx

        handle, name = tempfile.mkstemp(prefix="netron-", suffix=".onnx")
        os.close(handle)
        onnx.save(model, name)
        model = name
    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(f"no model at {path}: save it first (onnx.save(model, {str(path)!r}))")
    stop(address[1])
    served = netron.start(str(path), address=address, browse=False)
    _served[served[1]] = served
    url = f"http://{served[0]}:{served[1]}"
    if not quiet:
        shown = url.replace("0.0.0.0", "localhost")
        print(f"netron is serving {path.name} at {shown} (open it in your browser; stop() ends it)")
    return url


def stop(port: int | None = None) -> None:
    """Stop the netron server on ``port``, or every one this process started."""
    import netron

    for p in [port] if port is not None else list(_served):
        address = _served.pop(p, None)
        if address is not None:
            netron.stop(address)
            # netron's server thread notices the stop within its 0.25 s poll; until then the port is taken
            deadline = time.monotonic() + 3
            while netron.status(address) and time.monotonic() < deadline:
                time.sleep(0.05)
