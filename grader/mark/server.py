"""``python -m grader mark CLASS_FOLDER``: the marking page, served on this machine only, behind a token.

The page shows one written question across the class, one answer at a time, anonymously (the
:class:`grader.mark.api.Desk` answers its questions). Answers are student text facing a page that can
write marks, so the server keeps to these rules:

* it listens on 127.0.0.1 only (no flag changes that) and answers only requests whose ``Host`` is that
  address or ``localhost`` with its port (a page elsewhere cannot reach it through a rebound DNS name);
* as JupyterLab does, it prints a URL with a random token; the first visit trades it for a cookie
  (``HttpOnly``, ``SameSite=Strict``) and the URL loses it; every other request needs the cookie, and every
  API call also the token in a header (``X-Grader-Token``), which no other site's page can send without
  a preflight this server never grants;
* writes (``POST``) are refused when they come from another origin (``Origin``, ``Sec-Fetch-Site``), are
  not JSON or are over :data:`MAX_BODY` bytes;
* every response carries a strict Content-Security-Policy (:data:`POLICY`: the page's own script and style
  only, nothing inline, no frames, no forms), and the page writes student text with ``textContent`` only.

Marks are written by :mod:`grader.mark.store` in transactions; several pages (several TAs) at once lose
nothing. Stop it with Ctrl-C, then ``python -m grader report --out CLASS_FOLDER`` adds the marks to the
gradebooks, the statistics, the report page and every student's feedback.
"""
from __future__ import annotations

import html
import json
import secrets
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from grader.core import safe_text
from grader.mark.api import Desk, Refused
from grader.mark.store import Conflict, Store

HOST = "127.0.0.1"
MAX_BODY = 64 << 10
"""Largest request body read (a mark is a few hundred bytes; a comment at most 2,000 characters)."""
COOKIE = "grader_mark"
HEADER = "X-Grader-Token"
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
          "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
"""The Content-Security-Policy of every response."""
PAGE = Path(__file__).resolve().parent / "page"
STATIC = {"/app.js": ("app.js", "text/javascript; charset=utf-8"), "/app.css": ("app.css", "text/css; charset=utf-8")}


class Handler(BaseHTTPRequestHandler):
    """One request; the server holds the desk, the token and the port."""

    server: "MarkingServer"
    server_version = "grader-mark"
    sys_version = ""
    timeout = 30  # seconds a connection may stay silent (a body announced and never sent)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        if self.server.verbose:
            print(f"mark: {safe_text.terminal(format % args, 300)}", file=sys.stderr)

    def _send(self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": kind, "Content-Length": str(len(body)), "Content-Security-Policy": POLICY,
                            "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
                            "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
                            "Cross-Origin-Resource-Policy": "same-origin", **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data, ensure_ascii=True).encode(), "application/json")

    def _refuse(self, status: int, why: str) -> None:
        self._json(status, {"error": why})

    def _host_ok(self) -> bool:
        port = self.server.server_address[1]
        return self.headers.get("Host", "") in (f"{HOST}:{port}", f"localhost:{port}")

    def _cookie(self) -> str:
        for part in self.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                return value
        return ""

    def _authorised(self, *, api: bool) -> bool:
        token = self.server.token
        cookie_ok = secrets.compare_digest(self._cookie().encode(), token.encode())
        header_ok = secrets.compare_digest(self.headers.get(HEADER, "").encode(), token.encode())
        return cookie_ok and (header_ok or not api)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if not self._host_ok():
            return self._refuse(HTTPStatus.FORBIDDEN, "unknown host: open the URL the grader printed")
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/" and "token" in query:
            if not secrets.compare_digest(query["token"][0].encode(), self.server.token.encode()):
                return self._refuse(HTTPStatus.FORBIDDEN, "wrong token: open the URL the grader printed")
            return self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", {
                "Location": "/", "Set-Cookie": f"{COOKIE}={self.server.token}; HttpOnly; SameSite=Strict; Path=/"})
        if not self._authorised(api=url.path.startswith("/api/")):
            return self._refuse(HTTPStatus.FORBIDDEN, "not authorised: open the URL the grader printed (with its token)")
        if url.path == "/":
            page = (PAGE / "index.html").read_text(encoding="utf-8").replace("{{token}}", html.escape(self.server.token))
            return self._send(HTTPStatus.OK, page.encode(), "text/html; charset=utf-8")
        if url.path in STATIC:
            name, kind = STATIC[url.path]
            return self._send(HTTPStatus.OK, (PAGE / name).read_bytes(), kind)
        one = {key: values[0] for key, values in query.items()}
        try:
            with self.server.lock:
                if url.path == "/api/questions":
                    return self._json(HTTPStatus.OK, self.server.desk.overview())
                if url.path == "/api/answers":
                    return self._json(HTTPStatus.OK, self.server.desk.answers(one.get("question", "")))
                if url.path == "/api/name":
                    return self._json(HTTPStatus.OK, self.server.desk.name(one.get("question", ""), one.get("answer", "")))
        except Refused as exc:
            return self._refuse(HTTPStatus.BAD_REQUEST, str(exc))
        return self._refuse(HTTPStatus.NOT_FOUND, "no such page")

    def do_POST(self) -> None:  # noqa: N802
        if not self._host_ok():
            return self._refuse(HTTPStatus.FORBIDDEN, "unknown host")
        port = self.server.server_address[1]
        origin = self.headers.get("Origin")
        if origin is not None and origin not in (f"http://{HOST}:{port}", f"http://localhost:{port}"):
            return self._refuse(HTTPStatus.FORBIDDEN, "cross-origin writes are refused")
        if self.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            return self._refuse(HTTPStatus.FORBIDDEN, "cross-site writes are refused")
        if not self._authorised(api=True):
            return self._refuse(HTTPStatus.FORBIDDEN, "not authorised: open the URL the grader printed (with its token)")
        if self.headers.get_content_type() != "application/json":
            return self._refuse(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send JSON")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self._refuse(HTTPStatus.LENGTH_REQUIRED, "a body with its length is needed")
        if not 0 <= length <= MAX_BODY:
            return self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"at most {MAX_BODY} bytes")
        try:
            body = json.loads(self.rfile.read(length))
            if not isinstance(body, dict) or urlsplit(self.path).path != "/api/mark":
                raise Refused("POST /api/mark with a JSON object")
            with self.server.lock:
                saved = self.server.desk.save(str(body.get("question", "")), str(body.get("answer", "")), body)
        except (ValueError, Refused) as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            return self._refuse(HTTPStatus.BAD_REQUEST, str(exc) if isinstance(exc, Refused) else "the body is not JSON")
        except Conflict as exc:
            current = exc.current
            return self._json(HTTPStatus.CONFLICT, {"error": str(exc), "mark": None if current is None else {
                "items": list(current.items), "adjust": current.adjust, "comment": current.comment,
                "version": current.version, "sha256": current.sha256}})
        return self._json(HTTPStatus.OK, saved)

    def do_OPTIONS(self) -> None:  # noqa: N802 (no preflight is ever granted: no CORS headers)
        self._refuse(HTTPStatus.FORBIDDEN, "cross-origin requests are refused")


class MarkingServer(ThreadingHTTPServer):
    """The HTTP server of one class folder's marking page (bound to 127.0.0.1)."""

    daemon_threads = True

    def __init__(self, desk: Desk, port: int = 0, token: str | None = None, verbose: bool = False) -> None:
        super().__init__((HOST, port), Handler)
        self.desk, self.token, self.verbose = desk, token or secrets.token_urlsafe(32), verbose
        self.lock = threading.Lock()  # one request at a time reads the records and the store's connection

    def handle_error(self, request, client_address) -> None:
        """A page closed while its answer was on the way is no fault of the server's: say nothing of it."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        """The URL to open, token included."""
        return f"http://{HOST}:{self.server_address[1]}/?token={self.token}"


def main(*, out: Path, port: int = 0, marker: str = "", verbose: bool = False) -> int:
    """Serve the marking page of the class folder ``out`` until interrupted; 2 when ``out`` holds no
    graded submission."""
    if not any(out.glob("*/grading.json")) if out.is_dir() else True:
        print(f"grader: {out} holds no graded submission: run `python -m grader grade ... --out {out}` first",
              file=sys.stderr)
        return 2
    with Store(out) as store:
        server = MarkingServer(Desk(out, store, marker), port, verbose=verbose)
        questions = server.desk.overview()
        print(f"marking {out}: {len(questions)} written question(s) with answers; "
              f"{sum(q['counts']['to mark'] + q['counts']['to re-mark'] for q in questions)} answers to mark")
        print(f"open {server.url}\n(this machine only; Ctrl-C stops; then `python -m grader report --out {out}` "
              "adds the marks to the gradebooks and feedback)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("\nmark: stopped")
        finally:
            server.server_close()
    return 0
