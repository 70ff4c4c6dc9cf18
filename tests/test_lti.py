"""Grades back to an LMS over LTI 1.3's assignment and grade services, end to end against a real platform.

The platform is lti1p3platform 0.1.8 on the loopback (``tests/lti_platform.py``): its access-token endpoint
checks the tool's signed JWT against the public key registered for it, and its AGS handlers check every bearer
token. The tool is ``python -m grader lti post`` as an instructor runs it, with pylti1p3 2.0.0 as its client.
Scores are read back from the platform's line items (its result service, and its store); a bad key is refused;
posting twice changes nothing; a refused post and an interrupted run lose nothing.
"""
from __future__ import annotations

import dataclasses
import json

import pytest
from classes import result, store
from lti_platform import CLIENT_ID, DEPLOYMENT_ID, ISSUER, Server

from grader import cli
from grader.lti import ags, post, tool_config
from grader.lti.ledger import Ledger
from grader.lti.registration import Registration, ToolKey, tool_key
from grader.lti.scores import plan
from grader.report import class_folder
from grader.report.gradebook import TO_MARK
from grader.report.lms.table import gather
from grader.report.settings import Settings

ROSTER = ("student_id,name,email,submission,section,canvas_id\n"
          "s001,\"Adams, Amy\",amy@example.edu,class/amy,A1,101\n"
          "s002,\"Brown, Bob\",bob@example.edu,class/bob,A1,102\n"
          "s003,\"Clark, Cat\",cat@example.edu,class/cat,A2,103\n")


def _class(tmp_path):
    out, classroom = tmp_path / "out", tmp_path / "class"
    store(out, "amy", result("lab900", {"900.1": 5, "900.2": 0}), source=classroom / "amy" / "lab900.ipynb")
    store(out, "bob", result("lab900", {"900.1": 5, "900.2": 5}), source=classroom / "bob" / "lab900.ipynb")
    (tmp_path / "roster.csv").write_text(ROSTER)
    return out


@pytest.fixture
def lms(tmp_path):
    """A graded class (cat submitted nothing), the tool's key, and the platform registering its public half."""
    out = _class(tmp_path)
    key = tool_key(out, create=True)
    platform = Server(key.public_jwk())
    (out / "lti.json").write_text(json.dumps({
        "issuer": ISSUER, "client_id": CLIENT_ID, "deployment_id": DEPLOYMENT_ID,
        "token_url": platform.url + "/token", "lineitems_url": platform.url + "/lineitems",
        "user_id_column": "canvas_id"}))
    yield out, platform
    platform.close()


def _post(out, *extra):
    return cli.main(["lti", "post", "--out", str(out), "--roster", str(out.parent / "roster.csv"), *extra])


def _kept(platform):
    """The platform's store: line item resourceId -> user id -> (scoreGiven, gradingProgress)."""
    return {item["resourceId"]: {user: (s.get("scoreGiven"), s["gradingProgress"])
                                 for user, s in platform.store.scores[item_id].items()}
            for item_id, item in platform.store.items.items()}


def _score_posts(out):
    return [p for p in Ledger.open(out).posts() if p["url"].endswith("/scores")]


def test_scores_are_posted_then_read_back_from_the_platforms_line_items(lms, capsys):
    out, platform = lms
    assert _post(out) == 0
    said = capsys.readouterr()
    assert "3 sent (0 pending marking), 0 unchanged, 0 refused, 0 not sent" in said.out, said
    [item] = platform.store.items.values()
    assert (item["resourceId"], item["label"], item["scoreMaximum"], item["tag"]) == ("lab900", "lab900", 10, ags.TAG)
    assert _kept(platform) == {"lab900": {"101": (5, "FullyGraded"), "102": (10, "FullyGraded"),
                                          "103": (0, "FullyGraded")}}
    # read back through the platform's result service, as the LMS serves it
    registration = Registration.load(out)
    results = ags.Gradebook(registration, tool_key(out), Ledger.open(out)).results(item["id"])
    assert {r["userId"]: (r["resultScore"], r["resultMaximum"]) for r in results} == {
        "101": (5, 10), "102": (10, 10), "103": (0, 10)}
    assert {r["userId"]: r["comment"] for r in results}["103"] == "nothing submitted"
    # every request and its answer is on record; no token is
    posts = Ledger.open(out).posts()
    assert [p["status"] for p in _score_posts(out)] == [201, 201, 201]
    assert [p["sent"]["userId"] for p in _score_posts(out)] == ["101", "102", "103"]
    token = [p for p in posts if p["url"].endswith("/token")]
    assert token and token[0]["status"] == 200 and "access_token" not in token[0]["answer"]
    assert "eyJ" not in (out / "lti_posts.log").read_text()  # no JWT (assertion or token) in the record


def test_posting_twice_changes_nothing_and_a_changed_grade_alone_is_sent(lms, capsys):
    out, platform = lms
    assert _post(out) == 0
    before = {k: dict(v) for k, v in platform.store.scores.items()}
    assert _post(out) == 0
    assert "0 sent (0 pending marking), 3 unchanged" in capsys.readouterr().out
    assert len(_score_posts(out)) == 3 and platform.store.scores == before
    store(out, "cat", result("lab900", {"900.1": 5, "900.2": 5}), source=out.parent / "class" / "cat" / "lab900.ipynb")
    assert _post(out) == 0
    assert "1 sent (0 pending marking), 2 unchanged" in capsys.readouterr().out
    assert _kept(platform)["lab900"]["103"] == (10, "FullyGraded")
    assert len(platform.store.items) == 1  # the line item remembered, not created again


def test_an_existing_line_item_is_found_on_a_later_page_not_created_again(lms):
    out, platform = lms
    for n, resource in enumerate(["lab1", "lab2", "lab3", "lab900"], 1):  # pages of 2: lab900 is on page 2
        item_id = f"{platform.url}/lineitems/{n}"
        platform.store.items[item_id] = {"id": item_id, "resourceId": resource, "label": resource, "scoreMaximum": 10}
        platform.store.scores[item_id] = {}
    assert _post(out) == 0
    assert len(platform.store.items) == 4
    assert set(platform.store.scores[f"{platform.url}/lineitems/4"]) == {"101", "102", "103"}


def test_a_bad_key_is_refused_by_the_platform_and_nothing_is_lost(lms, capsys):
    out, platform = lms
    good = (out / "lti_key.json").read_text()
    other = tool_key(out.parent, "other_key.json", create=True)
    (out / "lti_key.json").write_text(json.dumps({"kid": tool_key(out).kid, "private_key": other.private_pem}))
    assert _post(out) == 2
    err = capsys.readouterr().err
    assert "refused the tool's access token" in err and "HTTP 401" in err, err
    [refusal] = Ledger.open(out).posts()
    assert refusal["status"] == 401 and "Signature verification failed" in refusal["answer"]
    assert platform.store.scores == {} and platform.tokens_issued == 0 and Ledger.open(out).accepted == {}
    (out / "lti_key.json").write_text(good)
    assert _post(out) == 0
    assert len(_kept(platform)["lab900"]) == 3


def test_a_refused_score_is_said_kept_and_sent_on_the_next_run(lms, capsys):
    out, platform = lms
    platform.store.refuse_user = "102"
    assert _post(out) == 1
    err = capsys.readouterr().err
    assert "refused, kept to send again: the score of s002 for lab900: the LMS answered HTTP 403" in err, err
    assert set(_kept(platform)["lab900"]) == {"101", "103"}
    assert set(Ledger.open(out).accepted) == {"lab900/s001", "lab900/s003"}
    platform.store.refuse_user = ""
    assert _post(out) == 0
    assert "1 sent (0 pending marking), 2 unchanged" in capsys.readouterr().out
    assert _kept(platform)["lab900"]["102"] == (10, "FullyGraded")


def test_an_interrupted_run_resumes_where_it_stopped(lms, monkeypatch, capsys):
    out, platform = lms
    real, calls = ags.Gradebook.post, []

    def dies_on_the_third(self, score, item):
        calls.append(score.student_id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, score, item)

    monkeypatch.setattr(ags.Gradebook, "post", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        _post(out)
    assert set(Ledger.open(out).accepted) == {"lab900/s001", "lab900/s002"}
    monkeypatch.setattr(ags.Gradebook, "post", real)
    assert _post(out) == 0
    assert "1 sent (0 pending marking), 2 unchanged" in capsys.readouterr().out
    assert len(_kept(platform)["lab900"]) == 3 and len(_score_posts(out)) == 3


def test_written_answers_to_mark_go_as_pending_manual_without_a_score_or_not_at_all(lms):
    out, platform = lms
    settings = Settings().updated(roster=str(out.parent / "roster.csv"))
    table = gather(class_folder.build(out, settings), ["lab900"], {"lab900": "lab900"}, "zero")
    student, chosen = table.students[1]
    table.students[1] = (student, {"lab900": dataclasses.replace(chosen["lab900"], status=TO_MARK)})
    skip, skipped = plan(table, "canvas_id", unmarked="skip")
    assert [s.student_id for s in skip] == ["s001", "s003"] and [s.student_id for s in skipped] == ["s002"]
    scores, _ = plan(table, "canvas_id", unmarked="pending")
    registration, ledger = Registration.load(out), Ledger.open(out)
    done = post.send(scores, ags.Gradebook(registration, tool_key(out), ledger), ledger, {"lab900": "lab900"})
    assert len(done.sent) == 3 and not done.refused
    assert _kept(platform)["lab900"]["102"] == (None, "PendingManual")
    [item] = platform.store.items
    results = {r["userId"]: r for r in ags.Gradebook(registration, tool_key(out), ledger).results(item)}
    assert "resultScore" not in results["102"] and results["101"]["resultScore"] == 5
    # once marked, the final score replaces the pending one
    assert _post(out) == 0
    assert _kept(platform)["lab900"]["102"] == (10, "FullyGraded")


def test_a_student_without_an_lms_id_is_said_and_not_sent(lms, capsys):
    out, platform = lms
    (out.parent / "roster.csv").write_text(ROSTER.replace(",102\n", ",\n"))
    assert _post(out) == 1
    assert "not sent: s002 lab900: no LMS user id: the roster's canvas_id column is empty" in capsys.readouterr().err
    assert set(_kept(platform)["lab900"]) == {"101", "103"}


def test_without_a_registration_the_command_says_what_to_write(tmp_path, capsys):
    out = _class(tmp_path)
    assert _post(out) == 2
    assert "no LTI registration" in capsys.readouterr().err
    (out / "lti.json").write_text(json.dumps({"issuer": ISSUER}))
    assert _post(out) == 2
    assert "missing client_id, deployment_id, token_url, lineitems_url" in capsys.readouterr().err


def test_the_tool_configuration_for_canvas_and_moodle_carries_the_tools_public_key(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["lti", "config", "--out", str(out), "--url", "https://hub.example.edu"]) == 0
    canvas = json.loads(capsys.readouterr().out)
    key = tool_key(out)
    assert canvas["public_jwk"] == key.public_jwk() and canvas["public_jwk"]["kid"] == key.kid
    assert "d" not in canvas["public_jwk"]  # the public half only
    assert canvas["oidc_initiation_url"] == "https://hub.example.edu/hub/lti13/oauth_login"
    assert canvas["target_link_uri"] == "https://hub.example.edu/hub"
    assert canvas["scopes"] == ags.SCOPES and canvas["extensions"][0]["domain"] == "hub.example.edu"
    assert (out / "lti_key.json").stat().st_mode & 0o077 == 0
    assert cli.main(["lti", "config", "--out", str(out), "--url", "https://hub.example.edu", "--format", "moodle"]) == 0
    moodle = capsys.readouterr().out
    assert key.public_pem().strip() in moodle and "PRIVATE" not in moodle
    assert "Initiate login URL:\nhttps://hub.example.edu/hub/lti13/oauth_login\n" in moodle
    assert "Redirection URI(s):\nhttps://hub.example.edu/hub/lti13/oauth_callback\n" in moodle
    assert tool_key(out) == key  # made once, kept
    assert tool_config.main(out=out, hub="hub.example.edu") == 2
    assert "expected the class server's address" in capsys.readouterr().err
    assert isinstance(key, ToolKey)


def test_a_line_item_deleted_at_the_lms_is_created_again_on_the_next_run(lms, capsys):
    out, platform = lms
    assert _post(out) == 0
    platform.store.items.clear()
    platform.store.scores.clear()
    store(out, "cat", result("lab900", {"900.1": 5, "900.2": 0}), source=out.parent / "class" / "cat" / "lab900.ipynb")
    assert _post(out) == 1
    assert "line item is gone from the LMS" in capsys.readouterr().err
    assert _post(out) == 0
    assert "3 sent (0 pending marking), 0 unchanged" in capsys.readouterr().out
    assert _kept(platform) == {"lab900": {"101": (5, "FullyGraded"), "102": (10, "FullyGraded"),
                                          "103": (5, "FullyGraded")}}


def test_a_lab_nobody_submitted_is_not_sent_without_its_maximum(lms, capsys):
    out, platform = lms
    assert _post(out, "--lab", "lab1") == 0
    said = capsys.readouterr()
    assert "0 sent (0 pending marking), 0 unchanged, 0 refused, 3 not sent" in said.out
    assert "not sent: s001 lab1: no graded submission of this lab yet" in said.err
    assert platform.store.items == {}
