"""An LTI 1.3 platform (the LMS's side) on the loopback, for the tests of ``grader/lti``: lti1p3platform 0.1.8.

lti1p3platform implements the platform's protocol: the access-token endpoint (``get_access_token``: the
client-credentials grant, the tool's signed JWT checked against the tool's registered public key, with its kid,
algorithm, signature and expiry; a token signed with the platform's key back) and the assignment and grade
services' handlers (``AssignmentsGradesService.handle_*``: every request's bearer token checked, its signature,
issuer, expiry and scopes). What the library leaves to a platform, and this module supplies, is what a real LMS
has around it: the storage of line items and scores (in memory, a score kept only when its timestamp is newer,
as AGS requires), and the HTTP server (``http.server`` in a thread) that turns requests into the library's
``Request`` and its ``Response`` into HTTP (a line-item page as a JSON list with a ``Link: rel="next"`` header, as
AGS says). The platform's own checks are lti1p3platform's, none of ours.

Not checked by lti1p3platform 0.1.8 (so not by these tests): the assertion's ``aud``, ``iss`` and ``jti`` (replay).
"""
from __future__ import annotations

import json
import threading
import typing as t
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from jwcrypto.jwk import JWK
from lti1p3platform.exceptions import LineItemNotFoundException
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.message_launch import MessageLaunchAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request, TRequest
from lti1p3platform.score import UpdateScoreStatus
from lti1p3platform.service_connector import AssignmentsGradesService

ISSUER = "https://platform.test"
CLIENT_ID = "course-tool-1"
DEPLOYMENT_ID = "deployment-1"


@dataclass
class Store:
    """The platform's line items and the latest score of each user in each (what an LMS's database holds)."""

    base: str = ""
    items: dict[str, dict] = field(default_factory=dict)
    scores: dict[str, dict[str, dict]] = field(default_factory=dict)
    """Line item id -> user id -> the score the platform kept."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    refuse_user: str = ""
    """A user id whose scores the platform refuses (403 notapplied), as an LMS does for a user not in the course."""


class KeyedRegistration(Registration):
    """lti1p3platform 0.1.8's registration, its key given an id: it derives the kid from a PEM, which has none, so
    its id_tokens and JWKS would carry no ``kid``, and a tool looking keys up by kid (PyJWT's ``PyJWKClient``,
    which ltiauthenticator uses) finds none. Real platforms send one."""

    KID = "platform-key-1"

    def get_kid(self) -> str:
        return self.KID

    def get_jwks(self) -> list[dict]:
        return [{**key, "kid": self.KID} for key in super().get_jwks()]


class Platform(LTI1P3PlatformConfAbstract):
    """The platform's configuration: its key pair and the tool's registration (the tool's public key pasted in)."""

    def init_platform_config(self, **kwargs: t.Any) -> None:
        key = JWK.generate(kty="RSA", size=2048)
        self.registration = (KeyedRegistration().set_iss(ISSUER).set_client_id(CLIENT_ID)
                             .set_deployment_id(DEPLOYMENT_ID)
                             .set_platform_private_key(key.export_to_pem(private_key=True, password=None).decode())
                             .set_platform_public_key(key.export_to_pem().decode())
                             .set_tool_key_set({"keys": [kwargs["tool_jwk"]]}))
        self._registration = self.registration

    def get_registration_by_params(self, **kwargs: t.Any) -> Registration:
        return self.registration


class Launch(MessageLaunchAbstract):
    """A resource-link launch of one user, made by lti1p3platform (its id_token signed with the platform's key)."""

    def render_launch_form(self, launch_data, **kwargs):
        return launch_data  # a browser would post it as a form: the test posts it itself


def launch(platform: Platform, preflight: dict, user: str, *, lms_user_id: str, expires_in: int = 300,
           sign_with: str | None = None) -> dict:
    """The form a platform posts to the tool's launch URL (``launch_url``, ``id_token``, ``state``), answering the
    tool's authentication request ``preflight`` for ``user``; ``sign_with`` (a PEM) signs with another key."""
    message = Launch(HttpRequest({"get_data": preflight, "form_data": {}}), platform)
    message.set_user_data(user, ["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"], full_name="A Student")
    message.set_resource_link_claim("resource-link-1", title="Lab 1")
    message.set_launch_context_claim("course-1", context_title="ML systems", context_label="MLS")
    message.set_custom_parameters_claim({"lms_user_id": lms_user_id})
    message.set_id_token_expiration(expires_in)
    if sign_with:
        real = platform.registration.get_platform_private_key()
        platform.registration.set_platform_private_key(sign_with)
        try:
            return message.lti_launch()
        finally:
            platform.registration.set_platform_private_key(real)
    return message.lti_launch()


class HttpRequest(Request):
    def build_metadata(self, request: t.Any) -> TRequest:
        return request


class Ags(AssignmentsGradesService):
    """AGS with the line items and scores kept in a :class:`Store`."""

    def __init__(self, request: Request, platform: Platform, store: Store):
        super().__init__(request, platform, f"{store.base}/lineitems")
        self.store = store

    def find_lineitems(self, page: int = 1, limit: int | None = None, line_item_id=None, resource_link_id=None,
                       resource_id=None, tag=None, **_):
        page, limit = int(page), int(limit or 2)  # small pages, so the tool must follow the next links
        with self.store.lock:
            items = [i for i in self.store.items.values()
                     if (resource_id is None or i.get("resourceId") == resource_id)
                     and (tag is None or i.get("tag") == tag)]
        chunk = items[(page - 1) * limit: page * limit]
        return {"content": chunk, "has_next": page * limit < len(items), "next": None}

    def find_lineitem(self, line_item_id: str):
        line_item_id = f"{self.store.base}/lineitems/{line_item_id}"
        with self.store.lock:
            if line_item_id not in self.store.items:
                raise LineItemNotFoundException()
            return self.store.items[line_item_id]

    def create_lineitem(self, creation_data):
        with self.store.lock:
            number = len(self.store.items) + 1
            item = {**creation_data, "id": f"{self.store.base}/lineitems/{number}"}
            self.store.items[item["id"]] = item
            self.store.scores[item["id"]] = {}
            return item

    def update_lineitem(self, update_data):
        raise NotImplementedError

    def delete_lineitem(self, line_item_id: str) -> None:
        raise NotImplementedError

    def update_score(self, line_item_id: str, score):
        item_id = f"{self.store.base}/lineitems/{line_item_id}"
        with self.store.lock:
            if item_id not in self.store.items:
                raise LineItemNotFoundException()
            user = str(score.get("userId"))
            if user == self.store.refuse_user:
                return UpdateScoreStatus.NOTAPPLIED
            kept = self.store.scores[item_id].get(user)
            if kept is not None and kept["timestamp"] >= score["timestamp"]:
                return UpdateScoreStatus.OLD_TIMESTAMP
            self.store.scores[item_id][user] = dict(score)
            return UpdateScoreStatus.SUCCESS if kept else UpdateScoreStatus.CREATED

    def get_results(self, line_item_id: str, page: int = 1, limit=None, user_id=None, **_):
        item_id = f"{self.store.base}/lineitems/{line_item_id}"
        with self.store.lock:
            if item_id not in self.store.items:
                raise LineItemNotFoundException()
            results = []
            for user, score in sorted(self.store.scores[item_id].items()):
                result = {"id": f"{item_id}/results/{user}", "userId": user, "scoreOf": item_id,
                          "resultMaximum": score.get("scoreMaximum"), "comment": score.get("comment", "")}
                if "scoreGiven" in score:
                    result["resultScore"] = score["scoreGiven"]
                results.append(result)
        return {"content": results, "has_next": False, "next": None}


def autopost(action: str, fields: dict) -> bytes:
    """An HTML page that posts ``fields`` to ``action`` as soon as it loads, as an LMS's launch pages do."""
    import html

    inputs = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(str(v))}">'
                     for k, v in fields.items())
    return (f'<!doctype html><html><body onload="document.forms[0].submit()"><form method="post" '
            f'action="{html.escape(action)}">{inputs}</form></body></html>').encode()


class Server:
    """The platform answering on ``http://127.0.0.1:<port>`` in a thread, until :meth:`close`.

    For a browser, it also plays the LMS's two pages of a launch: ``/course/launch?login_hint=U&target=URL``
    (a student following the course's link: the OIDC login initiation posted to :attr:`tool_login`) and
    ``/authorize`` (the platform's authorisation endpoint: the launch of ``U``, whose LMS user id is
    ``users[U]``, posted to the tool's ``redirect_uri``), each a page that submits its form when it loads."""

    def __init__(self, tool_jwk: dict):
        self.store = Store()
        self.platform = Platform(tool_jwk=tool_jwk)
        self.tokens_issued = 0
        self.tool_login = ""
        """The tool's OIDC login initiation URL (the hub's ``/hub/lti13/oauth_login``)."""
        self.users: dict[str, str] = {}
        """login_hint (the LMS's opaque user) -> the LMS user id its launches carry."""
        self.pages: list[str] = []
        """The browser pages served (their paths), in order."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _request(self) -> dict:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                ctype = self.headers.get("Content-Type", "")
                return {"method": self.command, "path": parts.path, "headers": dict(self.headers),
                        "content_type": ctype, "get_data": {k: int(v) if v.isdigit() else v for k, v in parse_qsl(parts.query)},
                        "form_data": dict(parse_qsl(raw)) if "form" in ctype else {},
                        "json": json.loads(raw) if raw and "json" in ctype else None}

            def _send(self, code: int, body, media: str = "application/json", headers: dict | None = None):
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(code)
                self.send_header("Content-Type", media)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _page(self, page: bytes):
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def _handle(self):
                request = self._request()
                path = request["path"].rstrip("/")
                if path == "/jwks":
                    return self._send(200, server.platform.get_jwks())
                if path in ("/course/launch", "/authorize"):
                    server.pages.append(path)
                if path == "/course/launch":
                    query = dict(parse_qsl(urlsplit(self.path).query))
                    return self._page(autopost(server.tool_login, {
                        "iss": ISSUER, "login_hint": query["login_hint"], "target_link_uri": query["target"],
                        "client_id": CLIENT_ID, "lti_deployment_id": DEPLOYMENT_ID}))
                if path == "/authorize":
                    preflight = dict(parse_qsl(urlsplit(self.path).query))
                    user = preflight["login_hint"]
                    form = launch(server.platform, preflight, user, lms_user_id=server.users[user])
                    return self._page(autopost(form.pop("launch_url"), form))
                if path == "/token" and self.command == "POST":
                    try:
                        token = server.platform.get_access_token(request["form_data"])
                    except Exception as exc:  # the library's refusal, whichever check failed
                        return self._send(401, {"error": "invalid_client", "error_description": repr(exc)})
                    server.tokens_issued += 1
                    return self._send(200, token)
                ags = Ags(HttpRequest(request), server.platform, server.store)
                parts = path.split("/")
                try:
                    if path == "/lineitems":
                        response = ags.handle_get_lineitems() if self.command == "GET" else ags.handle_create_lineitem()
                    elif len(parts) == 4 and parts[1] == "lineitems" and parts[3] == "scores":
                        response = ags.handle_update_score(parts[2])
                    elif len(parts) == 4 and parts[1] == "lineitems" and parts[3] == "results":
                        response = ags.handle_get_results(parts[2])
                    elif len(parts) == 3 and parts[1] == "lineitems":
                        response = ags.handle_get_lineitem(parts[2])
                    else:
                        return self._send(404, {"error": "no such endpoint"})
                except Exception as exc:  # lti1p3platform raises on a token it cannot verify
                    return self._send(401, {"error": "invalid_token", "error_description": repr(exc)})
                body, headers = response.result, {}
                if isinstance(body, dict) and "content" in body:
                    if body.get("next"):
                        headers["Link"] = f'<{body["next"]}>; rel="next"'
                    body = body["content"]
                if body is None and response.code >= 300:
                    body = {"error": response.message}
                self._send(response.code, body, response.media_type, headers)

            do_GET = do_POST = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.store.base = self.url
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
