"""The LMS's gradebook through LTI's assignment and grade services (AGS 2.0), with pylti1p3 as the client.

Each request first gets an access token with OAuth2's client-credentials grant, the client authenticated by a
JWT the tool signs with its key (LTI 1.3's security framework; pylti1p3's ``ServiceConnector`` makes and caches
it). A lab's line item is found by its ``resourceId`` (the lab's name, ``labN``) among the course's line
items, or created (label ``labN: <title>``, the lab's maximum); its URL is remembered in the ledger. Every request
and its answer go to the ledger (:mod:`grader.lti.ledger`); the access token and the signed assertion are not
written there.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import requests

from grader.lti.ledger import Ledger, now
from grader.lti.registration import Registration, ToolKey
from grader.lti.scores import Score

SCOPES = ["https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
          "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly",
          "https://purl.imsglobal.org/spec/lti-ags/scope/score"]
"""What the tool asks the LMS for: line items (read and create), results (read), scores (post)."""
TAG = "ml-cost-course"
"""The ``tag`` of the line items this tool creates."""
TIMEOUT = 30
"""Seconds one request may take."""


class Refused(Exception):
    """The LMS refused a request, or did not answer: ``status`` (``None``: no answer) and its ``answer``."""

    def __init__(self, what: str, status: int | None, answer: str):
        super().__init__(f"{what}: " + (f"the LMS answered HTTP {status}: {answer[:300]}" if status is not None
                                        else f"no answer from the LMS ({answer})"))
        self.status, self.answer = status, answer


@dataclass(frozen=True)
class Answer:
    """The LMS's answer to one score."""

    status: int
    body: str


class Gradebook:
    """One course's line items and scores at the LMS, every request recorded in ``ledger``."""

    def __init__(self, registration: Registration, key: ToolKey, ledger: Ledger):
        from pylti1p3.assignments_grades import AssignmentsGradesService
        from pylti1p3.registration import Registration as PyltiRegistration
        from pylti1p3.service_connector import ServiceConnector

        class Signed(PyltiRegistration):
            def get_kid(self) -> str:  # pylti1p3 would derive it from a public key; the tool's key has its own
                return key.kid

        reg = (Signed().set_issuer(registration.issuer).set_client_id(registration.client_id)
               .set_auth_token_url(registration.token_url).set_tool_private_key(key.private_pem))
        if registration.audience:
            reg.set_auth_audience(registration.audience)
        self.registration, self.ledger = registration, ledger
        self.token_refused = False
        """Whether the LMS refused the access token (the tool's key or client id is not the one it holds)."""
        session = requests.Session()
        session.hooks["response"].append(self._record)
        session.request = _with_timeout(session.request)
        self.service = AssignmentsGradesService(ServiceConnector(reg, session),
                                                {"scope": SCOPES, "lineitems": registration.lineitems_url})

    def _record(self, response: requests.Response, *args, **kwargs) -> None:
        request = response.request
        sent = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        answer = response.text
        if request.url == self.registration.token_url:
            self.token_refused = not response.ok
            sent = "client-credentials grant (signed assertion not recorded)"
            try:
                answer = json.dumps({k: v for k, v in response.json().items() if k != "access_token"})
            except ValueError:
                pass
        else:
            try:
                sent = json.loads(sent) if sent else None
            except ValueError:
                pass
        self.ledger.record(request.method, request.url, sent, response.status_code, answer)

    def _call(self, what: str, fn, *args):
        from pylti1p3.exception import LtiException, LtiServiceException

        try:
            return fn(*args)
        except LtiServiceException as exc:
            raise Refused(what, exc.response.status_code, exc.response.text) from None
        except requests.RequestException as exc:
            self.ledger.record("", "", what, None, repr(exc))  # no answer: what was tried, and the error
            raise Refused(what, None, repr(exc)) from None
        except LtiException as exc:
            raise Refused(what, None, str(exc)) from None

    def line_item(self, lab: str, label: str, maximum: float) -> str:
        """The URL of ``lab``'s line item: remembered, else found by its resourceId, else created."""
        from pylti1p3.lineitem import LineItem

        if lab in self.ledger.line_items:
            return self.ledger.line_items[lab]
        found = [item for item in self._call("reading the course's line items", self.service.get_lineitems)
                 if isinstance(item, dict) and item.get("resourceId") == lab]
        if found:
            url = str(found[0]["id"])
        else:
            item = LineItem().set_label(label).set_score_maximum(maximum).set_resource_id(lab).set_tag(TAG)
            created = self._call(f"creating the line item of {lab}", self.service.find_or_create_lineitem, item,
                                 "resource_id")
            url = str(created.get_id())
        self.ledger.line_item(lab, url)
        return url

    def post(self, score: Score, line_item: str) -> Answer:
        """Send one score to ``line_item``; :class:`Refused` when the LMS says no."""
        from pylti1p3.grade import Grade
        from pylti1p3.lineitem import LineItem

        body = score.body(now())
        grade = (Grade().set_user_id(body["userId"]).set_score_maximum(body["scoreMaximum"])
                 .set_activity_progress(body["activityProgress"]).set_grading_progress(body["gradingProgress"])
                 .set_timestamp(body["timestamp"]).set_comment(body["comment"]))
        if "scoreGiven" in body:
            grade.set_score_given(body["scoreGiven"])
        done = self._call(f"the score of {score.student_id} for {score.lab}", self.service.put_grade, grade,
                          LineItem({"id": line_item}))
        return Answer(200, json.dumps(done["body"]) if done["body"] is not None else "")

    def results(self, line_item: str) -> list[dict]:
        """The LMS's results of ``line_item`` (AGS's result service), as it holds them."""
        from pylti1p3.lineitem import LineItem

        return self._call(f"reading the results of {line_item}", self.service.get_grades, LineItem({"id": line_item}))


def _with_timeout(request):
    def bounded(method, url, **kwargs):
        kwargs.setdefault("timeout", TIMEOUT)
        return request(method, url, **kwargs)
    return bounded
