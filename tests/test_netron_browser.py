"""netron for real: a lab 3 tiled subgraph, served by util.netron_view, rendered in headless Chromium
(``webdriver.py``): open the page, wait for the graph view (``util.netron_view`` answers netron's one-time cookie
notice for the student, so it must never show), then read the drawn graph back from the DOM and a
screenshot.
"""
from __future__ import annotations

import time
from collections import Counter

import pytest
import webdriver
from webdriver import browser  # noqa: F401 (the fixture)

webdriver.needed()
RENDER_TIMEOUT = 60
"""Seconds netron may take to draw the graph (about 1 s on an idle machine)."""


@pytest.fixture()
def tiled_model():
    """Lab 3's tiled Gemm subgraph (M=32, K=64, N=128), built by the lab 3 solution."""
    from grader.author.solution import solution_namespace
    from util.labs import LABS

    if "lab3" not in LABS:
        pytest.fail("lab 3 is not in util/labs/", pytrace=False)
    return solution_namespace("lab3", ("3.1", "3.2"))["tiled_gemm_model"](32, 64, 128)


def test_netron_draws_the_tiled_subgraph_in_chromium(browser, tiled_model, tmp_path):
    from util.netron_view import show, stop

    url = show(tiled_model, host="127.0.0.1", port=0, quiet=True)
    try:
        browser.open(url)
        deadline = time.monotonic() + RENDER_TIMEOUT
        notices = set()
        while True:
            state = browser.script("return [document.body.className, "
                                   "document.getElementById('message-text').textContent]")
            if state[1].strip():
                notices.add(state[1].strip())
            if state[0] == "default":  # netron's graph view
                break
            assert time.monotonic() < deadline, f"netron did not draw the graph: page state {state}"
            time.sleep(0.1)
        assert not [n for n in notices if "cookies" in n or "update" in n], notices

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
        png.write_bytes(browser.screenshot())
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
    inked = [webdriver.inked_fraction(png, rect) for rect in drawn["rects"]]
    assert min(inked) > 0.3, inked
    corner = {"x": 0, "y": 100, "width": 200, "height": 200}  # empty canvas, left of the centred graph
    assert webdriver.inked_fraction(png, corner) < 0.01
