"""The marking page's server: this machine only, nothing without its token, no write from another origin, a
strict Content-Security-Policy on every answer, and marks saved through it as through the desk."""
from __future__ import annotations

import http.client
import json
import socket
import threading
from contextlib import contextmanager

import pytest
import writtenlab

from grader.mark.api import Desk
from grader.mark.server import COOKIE, HEADER, POLICY, MarkingServer
from grader.mark.store import Store


@contextmanager
def serving(tmp_path, answers=None):
    with writtenlab.class_of(tmp_path, answers or {"amy": ("It is 41 because.", "All.")}) as out, Store(out) as store:
        server = MarkingServer(Desk(out, store, "ta1"))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server, out, store
        finally:
            server.shutdown()
            server.server_close()


def request(server, method, path, body=None, headers=None, *, host=None, token=True):
    port = server.server_address[1]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent = {"Host": host or f"127.0.0.1:{port}"}
    if token:
        sent |= {"Cookie": f"{COOKIE}={server.token}", HEADER: server.token}
    if body is not None:
        sent["Content-Type"] = "application/json"
    sent |= headers or {}
    connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=sent)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response, data


def test_the_server_is_bound_to_the_loopback_address_and_unreachable_from_another_one(tmp_path):
    with serving(tmp_path) as (server, _, _):
        host, port = server.server_address
        assert host == "127.0.0.1"
        outside = [a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
                   if not a[4][0].startswith("127.")]
        for address in outside[:1]:  # a machine with an address of its own: nothing answers there
            with pytest.raises(OSError):
                socket.create_connection((address, port), timeout=2).close()


def test_nothing_is_served_without_the_token_and_the_first_visit_trades_it_for_a_cookie(tmp_path):
    with serving(tmp_path) as (server, _, _):
        for path in ("/", "/app.js", "/api/questions", "/api/answers?question=902.Q1"):
            response, data = request(server, "GET", path, token=False)
            assert response.status == 403 and b"not authorised" in data, path
        response, _ = request(server, "GET", "/?token=wrong", token=False)
        assert response.status == 403
        response, _ = request(server, "GET", f"/?token={server.token}", token=False)
        assert response.status == 303 and response.getheader("Location") == "/"
        assert response.getheader("Set-Cookie") == f"{COOKIE}={server.token}; HttpOnly; SameSite=Strict; Path=/"
        response, _ = request(server, "GET", "/api/questions", headers={HEADER: ""})  # the cookie alone: no API
        assert response.status == 403


def test_every_answer_carries_a_strict_content_security_policy(tmp_path):
    with serving(tmp_path) as (server, _, _):
        for path in ("/", "/app.js", "/app.css", "/api/questions", "/nowhere"):
            response, _ = request(server, "GET", path)
            assert response.getheader("Content-Security-Policy") == POLICY, path
            assert response.getheader("X-Content-Type-Options") == "nosniff"
        assert "script-src 'self';" in POLICY and "'unsafe-inline'" not in POLICY and "frame-ancestors 'none'" in POLICY
        response, page = request(server, "GET", "/")
        assert b"<script>" not in page and b"style=" not in page and b"onclick" not in page


def test_a_foreign_host_name_is_refused_against_dns_rebinding(tmp_path):
    with serving(tmp_path) as (server, _, _):
        response, _ = request(server, "GET", "/api/questions", host="evil.example:80")
        assert response.status == 403


def test_writes_from_another_origin_are_refused_and_nothing_is_stored(tmp_path):
    with serving(tmp_path) as (server, _, store):
        [answer] = json.loads(request(server, "GET", "/api/answers?question=902.Q1")[1])["answers"]
        body = {"question": "902.Q1", "answer": answer["id"], "sha256": answer["sha256"], "items": ["A"], "version": 0}
        for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"},
                        {"Content-Type": "text/plain"}):
            response, _ = request(server, "POST", "/api/mark", body, headers)
            assert response.status in (403, 415), headers
        response, _ = request(server, "POST", "/api/mark", body, token=False, headers={"Origin": "null"})
        assert response.status == 403
        response, _ = request(server, "OPTIONS", "/api/mark")
        assert response.status == 403 and response.getheader("Access-Control-Allow-Origin") is None
        assert store.marks() == []
        port = server.server_address[1]
        response, data = request(server, "POST", "/api/mark", body, {"Origin": f"http://127.0.0.1:{port}"})
        assert response.status == 200 and json.loads(data)["points"] == 1
        assert [m.items for m in store.marks()] == [("A",)]


def test_marking_through_the_server_and_a_conflict_answered_with_the_mark_as_it_is(tmp_path):
    with serving(tmp_path) as (server, _, _):
        [question] = json.loads(request(server, "GET", "/api/questions")[1])[:1]
        assert (question["question"], question["counts"]["to mark"]) == ("902.Q1", 1)
        data = json.loads(request(server, "GET", "/api/answers?question=902.Q1")[1])
        assert data["prompt"] == "Why is the answer 41?" and [i["id"] for i in data["rubric"]["items"]] == ["A", "B", "X"]
        [answer] = data["answers"]
        assert "amy" not in json.dumps(answer)  # anonymous until asked
        assert json.loads(request(server, "GET", f"/api/name?question=902.Q1&answer={answer['id']}")[1])[
            "submission"] == "amy"
        body = {"question": "902.Q1", "answer": answer["id"], "sha256": answer["sha256"], "items": ["A", "B"],
                "adjust": -0.5, "comment": "ok", "version": 0}
        response, data = request(server, "POST", "/api/mark", body)
        assert response.status == 200 and json.loads(data)["points"] == 1.5
        response, data = request(server, "POST", "/api/mark", body)  # saw version 0; it is 1 now
        assert response.status == 409 and json.loads(data)["mark"]["version"] == 1
        response, data = request(server, "POST", "/api/mark", {**body, "items": ["Z"], "version": 1})
        assert response.status == 400 and b"rubric" in data


def test_a_body_over_the_limit_or_not_json_is_refused(tmp_path):
    with serving(tmp_path) as (server, _, store):
        port = server.server_address[1]
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("POST", "/api/mark", body=b"x" * (70 << 10), headers={
            "Host": f"127.0.0.1:{port}", "Cookie": f"{COOKIE}={server.token}", HEADER: server.token,
            "Content-Type": "application/json"})
        assert connection.getresponse().status == 413
        connection.close()
        for body in (b"{not json", b"\xff\xfe{}", b"[1, 2]"):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("POST", "/api/mark", body=body, headers={
                "Host": f"127.0.0.1:{port}", "Cookie": f"{COOKIE}={server.token}", HEADER: server.token,
                "Content-Type": "application/json"})
            assert connection.getresponse().status == 400, body
            connection.close()
        assert store.marks() == []
