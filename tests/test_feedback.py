"""Feedback for students, as Markdown and as HTML: escaped, and free of the grader machine's paths."""
from __future__ import annotations

from html.parser import HTMLParser

from classes import result

from grader import REPO
from grader.report import feedback

HOSTILE = "<script>alert(1)</script> see [the answer](https://evil.example) | ![x](y) # heading"


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_feedback_escapes_what_a_submission_wrote():
    res = result("lab900", {"900.1": (0, "error", HOSTILE), "900.2": 5}, notes=(HOSTILE,))
    md = feedback.render("amy", res)
    assert "<script>" not in md and "](https://" not in md and "![x]" not in md
    assert md.count("| 900.1 First | 0/5 | error |") == 1  # the message cannot add table cells
    page = feedback.render_html("amy", res)
    parsed = _Tags()
    parsed.feed(page)
    assert "script" not in parsed.tags and "img" not in parsed.tags
    assert HOSTILE in "".join(parsed.text)  # shown as written
    assert {"h1", "h2", "table", "style"} <= set(parsed.tags)


def test_feedback_shows_no_path_of_the_grader_machine():
    message = (f"cell 4 raised CalledProcessError: /tmp/grade-lab4-k2j3x9/cpp/analysis.cpp:12:5: error: no match; "
               f"File {REPO}/util/answers.py, line 3; /autograder/submission/my lab.ipynb")
    res = result("lab900", {"900.1": (0, "error", message), "900.2": 5}, notes=(f"see {REPO}/grader",))
    for render in (feedback.render, feedback.render_html):
        text = render("amy", res, roots=["/autograder/submission"])
        assert "cpp/analysis.cpp:12:5: error" in text and "File util/answers.py, line 3" in text
        assert "/tmp/" not in text and str(REPO) not in text and "/autograder" not in text


def test_feedback_without_changes_has_no_instructor_section():
    text = feedback.render("amy", result("lab900", {"900.1": 5, "900.2": 0}))
    assert "Changed by your instructor" not in text and "**Score: 5 / 10**" in text
    assert "*Hint (failed):*" in text
