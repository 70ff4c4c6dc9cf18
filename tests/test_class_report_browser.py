"""The class report in a real browser (headless Chromium): the page renders from the disk, its plots are
drawn, and its links open each student's feedback."""
from __future__ import annotations

import base64

import webdriver
from classes import result, store
from webdriver import browser  # noqa: F401 (the fixture)

from grader.report import class_folder
from grader.report.settings import Settings

webdriver.needed()


def _class(out, tmp_path):
    store(out, "amy", result("lab900", {"900.1": 5, "900.2": 0}), source=tmp_path / "class" / "amy" / "lab900.ipynb")
    store(out, "bob", result("lab900", {"900.1": 5, "900.2": 5}), source=tmp_path / "class" / "bob" / "lab900.ipynb")
    store(out, "cat <b>&amp; x", result("lab900", {"900.1": (0, "error", "<b>boom</b>"), "900.2": 0}, execution="timeout"),
          source=tmp_path / "class" / "cat" / "lab900.ipynb")
    store(out, "dan", result("lab8", {"8.1": 2.5}), source=tmp_path / "class" / "dan" / "lab8.ipynb")
    (tmp_path / "roster.csv").write_text("student_id,name,submission\ns1,Amy,class/amy\ns2,Bob,class/bob\n"
                                         "s3,Cat,class/cat\ns4,Dan,class/dan\ns5,Eve,class/eve\n")
    class_folder.write(class_folder.build(out, Settings().updated(roster=str(tmp_path / "roster.csv"))))


def test_the_class_report_renders_its_plots_and_links_to_feedback(browser, tmp_path):
    out = tmp_path / "out"
    _class(out, tmp_path)
    browser.call("POST", f"/session/{browser.session}/url", {"url": (out / "report.html").as_uri()})
    browser.wait("return document.readyState === 'complete'", "the report did not load")
    page = browser.script("""
        const imgs = Array.from(document.querySelectorAll('img.plot'));
        return {
          title: document.title,
          sections: Array.from(document.querySelectorAll('section h2'), (h) => h.textContent),
          plots: imgs.map((i) => ({alt: i.alt, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight})),
          rects: imgs.map((i) => { const r = i.getBoundingClientRect();
                                   return {x: r.x, y: r.y, width: r.width, height: r.height}; }),
          links: Array.from(document.querySelectorAll('table.students a'), (a) => [a.textContent, a.href]),
          statuses: Array.from(document.querySelectorAll('table.students tr td:nth-child(6)'), (td) => td.textContent),
          failures: Array.from(document.querySelectorAll('table.tasks td:nth-child(6)'), (td) => td.textContent),
          scripts: document.querySelectorAll('script').length,
        };""")
    assert page["title"] == "Class report" and page["sections"] == ["lab8", "lab900"]
    assert [p["alt"] for p in page["plots"]] == ["lab8 score distribution", "lab8 pass rate per task",
                                                 "lab900 score distribution", "lab900 pass rate per task"]
    assert all(p["complete"] and p["width"] > 300 and p["height"] > 150 for p in page["plots"]), page["plots"]
    assert [name for name, _ in page["links"]] == ["dan", "amy", "bob", "cat <b>&amp; x"]  # escaped, not italics
    assert "not submitted" in page["statuses"] and "errors" in page["statuses"]
    assert page["failures"] == ["failed: answer: differs", "error: answer: <b>boom</b>", "failed: answer: differs"]
    assert page["scripts"] == 0

    # the plots are really painted: ink where each picture is
    browser.call("POST", f"/session/{browser.session}/window/rect", {"width": 1280, "height": 3000})
    png = tmp_path / "report.png"
    png.write_bytes(base64.b64decode(browser.call("GET", f"/session/{browser.session}/screenshot")))
    rects = browser.script("return Array.from(document.querySelectorAll('img.plot'), (i) => {"
                           "const r = i.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, "
                           "height: r.height}; })")
    inked = [webdriver.inked_fraction(png, rect) for rect in rects]
    assert min(inked) > 0.03, inked

    # every link opens that student's feedback
    for name, href in page["links"]:
        browser.call("POST", f"/session/{browser.session}/url", {"url": href})
        browser.wait("return document.readyState === 'complete'", f"{href} did not load")
        heading = browser.script("return document.querySelector('h1').textContent")
        assert heading.endswith(f"feedback: {name}"), (href, heading)
    assert browser.script("return document.querySelector('p.score').textContent") == "Score: 0 / 10"
