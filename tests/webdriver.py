"""Headless Chromium for the browser tests, driven through chromedriver's W3C WebDriver HTTP API with
plain urllib (no Selenium). The Debian packages ``chromium`` and ``chromium-driver`` provide both
programs (``.ci/run`` installs them); without them a browser test is skipped, except under CI
(``$CI`` set), where it fails. Use the ``browser`` fixture (``from webdriver import browser``), which
skips by itself, or ``webdriver.needed()`` at a module's top.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,1024"]


def needed() -> None:
    """Skip the calling test (or module, at import) without Chromium and its driver (fail instead under CI)."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        reason = "needs the Debian packages chromium and chromium-driver (.ci/run installs them)"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason, allow_module_level=True)  # also inside a test or fixture


PAGE_TEXT = "return document.body ? document.body.innerText : ''"


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

    def open(self, url: str) -> None:
        self.call("POST", f"/session/{self.session}/url", {"url": url})

    def script(self, source: str):
        return self.call("POST", f"/session/{self.session}/execute/sync", {"script": source, "args": []})

    def wait(self, script: str, what: str, timeout: float = 30, poll: float = 0.1):
        """Run ``script`` (JavaScript that returns a value) until its value is truthy and return that value.

        A script that throws counts as "not yet": between a navigation's start and the new document's body
        (``document.body`` is null there) every page script can throw, and a page that has just changed its
        ``location`` is such a page. Fails with ``what``, the last value or error and the page's text."""
        deadline, value, error = time.monotonic() + timeout, None, None
        while True:
            try:
                value, error = self.script(script), None
            except AssertionError as err:  # the page is navigating (or the script is wrong: shown on timeout)
                value, error = None, err
            if value:
                return value
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what}: not within {timeout} s (last value {value!r}, error {error}; "
                                     f"at {self._safe('return location.href')}: "
                                     f"{(self._safe(PAGE_TEXT) or '')[-1500:]})")
            time.sleep(poll)

    def text(self) -> str:
        """The page's visible text ('' while the document has no body yet)."""
        return self.script(PAGE_TEXT)

    def _safe(self, script: str):
        try:
            return self.script(script)
        except AssertionError as err:
            return f"<{err}>"

    def screenshot(self) -> bytes:
        import base64

        return base64.b64decode(self.call("GET", f"/session/{self.session}/screenshot"))


@pytest.fixture()
def browser(tmp_path):
    """A headless Chromium session with a fresh profile; chromedriver and Chromium end afterwards."""
    needed()
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
        # a headless window never has the focus (Chromium 150: document.hasFocus() is false), and JupyterLab
        # takes its current widget (shell.currentWidget, the notebook commands' target) from focus events:
        # emulate a focused page, as a student's browser window is
        web.call("POST", f"/session/{web.session}/goog/cdp/execute",
                 {"cmd": "Emulation.setFocusEmulationEnabled", "params": {"enabled": True}})
        yield web
    finally:
        if web.session:
            try:
                web.call("DELETE", f"/session/{web.session}")  # closes Chromium
            except (AssertionError, OSError):
                pass
        os.killpg(driver.pid, signal.SIGTERM)
        driver.wait(timeout=30)


def inked_fraction(png: Path, rect: dict) -> float:
    """The fraction of the screenshot's pixels inside ``rect`` (CSS pixels) that are not white."""
    import matplotlib.image

    pixels = matplotlib.image.imread(str(png))[..., :3]
    x0, y0 = int(rect["x"]), int(rect["y"])
    box = pixels[y0:y0 + int(rect["height"]), x0:x0 + int(rect["width"])]
    return float((box.min(axis=-1) < 0.8).mean()) if box.size else 0.0
