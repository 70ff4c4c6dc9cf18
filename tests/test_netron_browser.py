"""netron for real: a lab 3 tiled subgraph, served by util.netron_view, rendered in headless Chromium.

Chromium is driven through chromedriver's W3C WebDriver HTTP API with plain urllib (no Selenium):
open the page, accept netron's one-time cookie notice (a student clicks it once; it blocks the
graph until then), wait for the graph view, then read the drawn graph back from the DOM and a
screenshot. The Debian packages ``chromium`` and ``chromium-driver`` provide both programs
(``.ci/run`` installs them); without them the test is skipped, except under CI, where it fails.
"""
from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,1024"]
RENDER_TIMEOUT = 60
"""Seconds netron may take to draw the graph (about 1 s on an idle machine)."""

if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    reason = "needs the Debian packages chromium and chromium-driver (.ci/run installs them)"
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriver:
    """The few WebDriver calls this test needs, over HTTP."""

    def __init__(self, base: str) -> None:
        self.base, self.session = base, None

    def call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return json.loads(resp.read())["value"]
        except urllib.error.HTTPError as err:
            raise AssertionError(f"WebDriver {method} {path}: {err.read().decode()[:500]}") from None

    def script(self, source: str):
        return self.call("POST", f"/session/{self.session}/execute/sync", {"script": source, "args": []})


@pytest.fixture()
def browser(tmp_path):
    """A headless Chromium session with a fresh profile; chromedriver and Chromium end afterwards."""
    port = _free_port()
    driver = subprocess.Popen([str(CHROMEDRIVER), f"--port={port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    web = WebDriver(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if web.call("GET", "/status")["ready"]:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "chromedriver did not start"
            time.sleep(0.1)
        options = {"binary": str(CHROMIUM), "args": [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]}
        web.session = web.call("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options}}})["sessionId"]
        yield web
    finally:
        if web.session:
            try:
                web.call("DELETE", f"/session/{web.session}")  # closes Chromium
            except (AssertionError, OSError):
                pass
        os.killpg(driver.pid, signal.SIGTERM)
        driver.wait(timeout=30)


@pytest.fixture()
def tiled_model():
    """Lab 3's tiled Gemm subgraph (M=32, K=64, N=128), built by the lab 3 solution."""
    from grader.notebook import solution_namespace
    from util.labs import LABS

    if "lab3" not in LABS:
        pytest.fail("lab 3 is not in util/labs/", pytrace=False)
    return solution_namespace("lab3", ("3.1", "3.2"))["tiled_gemm_model"](32, 64, 128)


def _inked_fraction(png: Path, rect: dict) -> float:
    """The fraction of the screenshot's pixels inside ``rect`` (CSS pixels) that are not white."""
    import matplotlib.image

    pixels = matplotlib.image.imread(str(png))[..., :3]
    x0, y0 = int(rect["x"]), int(rect["y"])
    box = pixels[y0:y0 + int(rect["height"]), x0:x0 + int(rect["width"])]
    return float((box.min(axis=-1) < 0.8).mean()) if box.size else 0.0


def test_netron_draws_the_tiled_subgraph_in_chromium(browser, tiled_model, tmp_path):
    from util.netron_view import show, stop

    url = show(tiled_model, host="127.0.0.1", port=0, quiet=True)
    try:
        browser.call("POST", f"/session/{browser.session}/url", {"url": url})
        deadline = time.monotonic() + RENDER_TIMEOUT
        while True:
            state = browser.script("return [document.body.className, "
                                   "document.getElementById('message-text').textContent]")
            if state[0] == "default":  # netron's graph view
                break
            if "cookies" in state[1]:  # the one-time notice: accept it, as a student would
                browser.script("document.getElementById('message-button').click()")
            assert time.monotonic() < deadline, f"netron did not draw the graph: page state {state}"
            time.sleep(0.2)

        drawn = browser.script("""
            const text = (g) => g.querySelector('text').textContent;
            const box = (g) => g.getBBox();
            return {
              nodes: Array.from(document.querySelectorAll('#canvas g.graph-node'), text),
              inputs: Array.from(document.querySelectorAll('#canvas g.graph-input'), text),
              widths: Array.from(document.querySelectorAll('#canvas g.graph-node'), (g) => box(g).width),
              rects: Array.from(document.querySelectorAll('#canvas g.graph-node'), (g) => {
                const r = g.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; }),
              ratio: window.devicePixelRatio,
              edges: Array.from(document.querySelectorAll('#canvas .edge-label'), (e) => e.textContent),
            };""")
        png = tmp_path / "netron.png"
        png.write_bytes(base64.b64decode(browser.call("GET", f"/session/{browser.session}/screenshot")))
    finally:
        stop()

    # every operator of the model is drawn, as many times as it occurs, and laid out (non-zero size)
    assert Counter(drawn["nodes"]) == Counter(node.op_type for node in tiled_model.graph.node)
    assert drawn["nodes"].count("MatMul") >= 2 and "Gemm" not in drawn["nodes"]
    assert sorted(drawn["inputs"]) == sorted(i.name for i in tiled_model.graph.input)
    assert all(width > 10 for width in drawn["widths"])
    assert "32×128" in drawn["edges"]  # the output's shape labels the last edge
    # the node boxes are really painted: mostly ink where the DOM says each node is, blank around
    assert drawn["ratio"] == 1
    inked = [_inked_fraction(png, rect) for rect in drawn["rects"]]
    assert min(inked) > 0.3, inked
    corner = {"x": 0, "y": 100, "width": 200, "height": 200}  # empty canvas, left of the centred graph
    assert _inked_fraction(png, corner) < 0.01
