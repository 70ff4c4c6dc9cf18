"""The marking page in a real browser (headless Chromium, the course's webdriver): a TA marks three answers with
the keyboard alone, a hostile answer stays text, and the totals move in the gradebook and the feedback."""
from __future__ import annotations

import csv
import threading

import webdriver
import writtenlab
from webdriver import browser  # noqa: F401 (the fixture)

from grader.mark.api import Desk
from grader.mark.server import MarkingServer
from grader.mark.state import pseudonym
from grader.mark.store import Store
from grader.report import class_folder
from grader.report.settings import Settings

webdriver.needed()

HOSTILE = ("<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"
           "=HYPERLINK(\"http://evil\") \u202e gnp.exe")
ANSWERS = {"amy": ("It is 41, as the task's first cell fixes it.", "All."), "bob": (HOSTILE, "Some."),
           "cat": ("Forty-one: the number the task asks for.", "")}
ENTER, ESCAPE = "\ue007", "\ue00c"


def _keys(browser, *keys: str) -> None:
    actions = [step for key in keys for step in ({"type": "keyDown", "value": key}, {"type": "keyUp", "value": key})]
    browser.call("POST", f"/session/{browser.session}/actions",
                 {"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})


def _totals(out):
    class_folder.write(class_folder.build(out, Settings()))
    with (out / "gradebook_lab902.csv").open(encoding="utf-8") as handle:
        return {r["submission"]: (r["902.Q1"], r["total"], r["status"]) for r in csv.DictReader(handle)}


def test_a_ta_marks_three_answers_by_keyboard_and_the_totals_move(browser, tmp_path):
    with writtenlab.class_of(tmp_path, ANSWERS) as out:
        assert _totals(out) == {"amy": ("to mark", "7", "to mark"), "bob": ("to mark", "7", "to mark"),
                                "cat": ("to mark", "7", "to mark")}
        with Store(out) as store:
            server = MarkingServer(Desk(out, store, "ta1"))
            threading.Thread(target=server.serve_forever, daemon=True).start()
            try:
                browser.open(server.url)
                browser.wait("return document.body.dataset.ready === '1'", "the marking page did not load")
                assert browser.script("return location.search") == ""  # the token left the URL for a cookie
                assert browser.script("return document.querySelector('#question').value") == "902.Q1"
                keys = [(("1", "2"), ()), (("1",), ()), (("2",), ("c", *"Say why 41.", ESCAPE))]  # (items, more)
                seen = {}
                for items, more in keys:
                    answer = browser.script("return document.body.dataset.answer")
                    text = browser.script("return document.querySelector('#text').textContent")
                    if text.startswith("<img"):  # the hostile answer: shown as the text it is, nothing run
                        assert browser.script("return document.querySelectorAll('#text *').length") == 0
                        assert browser.script("return document.title") == "Marking written answers"
                    _keys(browser, *more, *items, ENTER)
                    browser.wait(f"return document.body.dataset.answer !== '{answer}'", "Enter did not move on")
                    seen[answer] = (items, more)
                assert browser.script("return document.querySelector('#message').textContent").endswith(
                    "every answer to this question is marked")
                assert browser.script("return document.title") == "Marking written answers"
            finally:
                server.shutdown()
                server.server_close()
            secret = store.secret()
            marks = {m.submission: m for m in store.marks()}
        by_id = {pseudonym(secret, "902.Q1", name): name for name in ANSWERS}
        expected = {"amy": None, "bob": None, "cat": None}
        for answer, (pressed, _) in seen.items():
            items = tuple(sorted({"1": "A", "2": "B"}[k] for k in pressed))
            expected[by_id[answer]] = items
            assert tuple(sorted(marks[by_id[answer]].items)) == items
        assert {m.marker for m in marks.values()} == {"ta1"}
        totals = _totals(out)
        for name, items in expected.items():
            assert totals[name][:2] == (str(len(items)), str(7 + len(items))), (name, totals[name])
        commented = next(name for answer, name in by_id.items() if seen[answer][1])
        feedback = (out / commented / "feedback.md").read_text(encoding="utf-8")
        assert "- Comment: Say why 41." in feedback and "- \\+1: Says why" in feedback, feedback
        assert "a common mix-up" not in feedback  # a marker's note never reaches the student
