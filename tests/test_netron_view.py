"""util.netron_view without a browser: one printed address, no temporary file, only the model served,
netron's notices answered by the server, and servers that stop and free their port."""
from __future__ import annotations

import os
import socket
import tempfile
import urllib.error
import urllib.request

import pytest

from util.netron_view import serving, show, stop
from util.onnx_models import tiny_shape_graph


@pytest.fixture()
def model():
    return tiny_shape_graph()


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.headers, response.read()


def test_a_model_proto_is_served_from_memory_and_announced_once(model, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # anything mkstemp made would land here
    url = show(model, port=0)
    try:
        assert capsys.readouterr().out.count(url.split("//")[1]) == 1  # netron's own "Serving" line is gone
        headers, page = _get(url)
        assert b'<meta name="file" content="/data/model.onnx">' in page
        _, served = _get(f"{url}/data/model.onnx")
        assert served == model.SerializeToString()
        with pytest.raises(urllib.error.HTTPError) as err:   # nothing but the model: not the kernel's files
            _get(f"{url}/data/{os.path.basename(__file__)}")
        assert err.value.code == 404
    finally:
        stop()
    assert list(tmp_path.iterdir()) == []


def test_the_page_skips_netrons_cookie_and_update_notices(model):
    url = show(model, port=0, quiet=True)
    try:
        headers, page = _get(url)
    finally:
        stop()
    assert headers["Set-Cookie"].startswith("consent=")   # what accepting the notice stores
    assert b'name="date"' not in page                      # no release date: no "please update" after 180 days
    assert b'<meta name="version" content="9.3.3">' in page


def test_a_path_is_served_and_a_missing_one_is_refused(model, tmp_path):
    import onnx

    path = tmp_path / "tiny.onnx"
    onnx.save(model, str(path))
    url = show(path, port=0, quiet=True)
    try:
        assert _get(f"{url}/data/tiny.onnx")[1] == path.read_bytes()
    finally:
        stop()
    with pytest.raises(FileNotFoundError, match="save it first"):
        show(tmp_path / "missing.onnx", port=0)


def test_showing_again_on_the_same_port_replaces_the_model_and_stop_frees_the_port(model):
    url = show(model, port=0, quiet=True)
    port = int(url.rsplit(":", 1)[1])
    again = show(model, port=port, quiet=True)
    assert again == url and serving() == [port]
    stop()
    assert serving() == []
    with socket.socket() as s:                 # the port is free again
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
