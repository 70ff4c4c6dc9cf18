"""LTI 1.3 launches into a real JupyterHub 6.1.1 with the course's roster login (``docker/hub/lti_login.py``).

The platform is lti1p3platform 0.1.8 on the loopback (``tests/lti_platform.py``: its JWKS, and id_tokens it makes
and signs); the hub is JupyterHub from the hub's pinned requirements with ``beside(NativeAuthenticator)``:
jupyterhub-ltiauthenticator 1.6.3's launches mapped to the roster by ``RosterLTI13Authenticator``, beside the
roster's sign-up (whose login page stays the hub's), run with a proxy that routes nothing (the test talks to the
hub's own port: no configurable-http-proxy, no Docker, no student's server); and the class server's own
``jupyterhub_config.py``, run the same way with ``lti_launch.json`` in its folder. Each launch goes the OIDC way a browser would, done with
``requests``: the login initiation at the hub, its redirect to the platform's authorisation URL (state and nonce in
cookies), the platform's form posted back to the hub's launch URL. A roster student signs in as their
``student_id``; a bad signature, an expired id_token and an LMS user the roster does not know are refused.

Needs ``COURSE_HUB_PYTHON``: a Python with ``docker/hub/requirements.txt`` installed (``docker/setup.sh --hub V``,
as CI's step 1d does); skipped without it. Headless Chromium makes two students' launches from the LMS's pages (at
``localhost``, another site than the hub's ``127.0.0.1``); not done here: the hub's images, a student's server.
"""
from __future__ import annotations

import html
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
from jwcrypto.jwk import JWK
from lti_platform import CLIENT_ID, DEPLOYMENT_ID, ISSUER, Server, launch
from webdriver import browser  # noqa: F401 (a fixture)

HUB_DIR = Path(__file__).resolve().parent.parent / "docker" / "hub"
PYTHON = os.environ.get("COURSE_HUB_PYTHON", "")

NO_PROXY = """
from jupyterhub.proxy import Proxy


class NoProxy(Proxy):
    '''No proxy: the test talks to the hub's own port.'''
    should_start = False

    async def add_route(self, routespec, target, data):
        pass

    async def delete_route(self, routespec):
        pass

    async def get_all_routes(self):
        return {}
"""
"""A proxy class for both configurations below (configurable-http-proxy is not started here)."""

CONFIG = """
import sys
sys.path.insert(0, {hub_dir!r})
from lti_login import beside
from nativeauthenticator import NativeAuthenticator
{no_proxy}

c.JupyterHub.proxy_class = NoProxy
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.port = {public_port}
c.JupyterHub.db_url = "sqlite:///{folder}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{folder}/cookie_secret"
c.JupyterHub.pid_file = "{folder}/hub.pid"
c.JupyterHub.authenticator_class = beside(NativeAuthenticator)   # the roster's sign-up, and LTI launches
c.NativeAuthenticator.open_signup = True
c.RosterLTI13Authenticator.issuer = {issuer!r}
c.RosterLTI13Authenticator.client_id = [{client_id!r}]
c.RosterLTI13Authenticator.authorize_url = {authorize!r}
c.RosterLTI13Authenticator.jwks_endpoint = {platform!r} + "/jwks"
c.RosterLTI13Authenticator.uri_scheme = "http"
c.RosterLTI13Authenticator.roster = "{folder}/roster.csv"
c.RosterLTI13Authenticator.user_id_column = "canvas_id"
c.Authenticator.allowed_users = {{"s001", "s002"}}   # the roster's ids, as the class server's configuration has it
"""

ROSTER = "student_id,name,canvas_id\ns001,Amy,101\ns002,Bob,102\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


COURSE_CONFIG = """
load_subconfig({real!r})   # the class server's own configuration, as hub.sh runs it
{no_proxy}

c.JupyterHub.proxy_class = NoProxy   # no configurable-http-proxy here: the test talks to the hub's port
c.JupyterHub.hub_port = {hub_port}
"""


def _running_hub(folder: Path, write_config, env: dict):
    """Start JupyterHub with the config ``write_config(hub_port, platform)`` writes; yield (url, platform, folder)."""
    if not PYTHON:
        pytest.skip("COURSE_HUB_PYTHON is not set (a Python with docker/hub/requirements.txt installed)")
    platform = Server(JWK.generate(kty="RSA", size=2048).export_public(as_dict=True))
    hub_port = _free_port()
    url = f"http://127.0.0.1:{hub_port}"
    platform.registration_launch = url + "/hub"  # the target link: the hub, as `python -m grader lti config` says
    platform.platform.registration.set_launch_url(platform.registration_launch)
    (folder / "roster.csv").write_text(ROSTER)
    write_config(hub_port, platform)
    log = (folder / "hub.log").open("w")
    process = subprocess.Popen([PYTHON, "-m", "jupyterhub", "-f", str(folder / "config.py")], cwd=folder,
                               stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env})
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if requests.get(url + "/hub/api", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert process.poll() is None, (folder / "hub.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (folder / "hub.log").read_text()[-3000:]
            time.sleep(0.3)
        yield url, platform, folder
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        platform.close()


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hub_lti")

    def write(hub_port, platform):
        (folder / "config.py").write_text(CONFIG.format(
            hub_dir=str(HUB_DIR), hub_port=hub_port, public_port=_free_port(), folder=folder, issuer=ISSUER,
            client_id=CLIENT_ID, platform=platform.url, authorize=platform.url + "/authorize", no_proxy=NO_PROXY))

    yield from _running_hub(folder, write, {})


@pytest.fixture(scope="module")
def browser_hub(tmp_path_factory):
    """As ``hub``, the platform's pages at ``localhost`` (another site than the hub's 127.0.0.1, as an LMS is):
    the browser's launch posts across sites, where a browser's cookie rules apply."""
    folder = tmp_path_factory.mktemp("hub_lti_browser")

    def write(hub_port, platform):
        (folder / "config.py").write_text(CONFIG.format(
            hub_dir=str(HUB_DIR), hub_port=hub_port, public_port=_free_port(), folder=folder, issuer=ISSUER,
            client_id=CLIENT_ID, platform=platform.url, no_proxy=NO_PROXY,
            authorize=platform.url.replace("127.0.0.1", "localhost") + "/authorize"))

    yield from _running_hub(folder, write, {})


@pytest.fixture(scope="module")
def course_hub(tmp_path_factory):
    """The class server's own jupyterhub_config.py, its state folder holding lti_launch.json."""
    folder = tmp_path_factory.mktemp("course_hub_lti")

    def write(hub_port, platform):
        (folder / "lti_launch.json").write_text(json.dumps({
            "issuer": ISSUER, "client_id": CLIENT_ID, "authorize_url": platform.url + "/authorize",
            "jwks_url": platform.url + "/jwks", "user_id_column": "canvas_id", "uri_scheme": "http"}))
        (folder / "config.py").write_text(COURSE_CONFIG.format(real=str(HUB_DIR / "jupyterhub_config.py"),
                                                               hub_port=hub_port, no_proxy=NO_PROXY))

    yield from _running_hub(folder, write, {
        "COURSE_HUB_STATE": str(folder), "COURSE_HUB_IP": "127.0.0.1", "COURSE_HUB_PORT": str(_free_port()),
        "COURSE_HUB_HANDIN_PORT": str(_free_port()), "COURSE_HUB_CULL": "0"})


def _launch(hub_url: str, platform: Server, user: str, lms_user_id: str, target: str | None = None,
            **options) -> requests.Response:
    """One launch, as a browser makes it: login initiation, the platform's answer, the form posted back.
    ``target``: the resource link's target link (default: the tool's launch URL, the hub)."""
    browser = requests.Session()
    start = browser.post(hub_url + "/hub/lti13/oauth_login", allow_redirects=False, timeout=30, data={
        "iss": ISSUER, "login_hint": user, "target_link_uri": target or platform.registration_launch,
        "client_id": CLIENT_ID, "lti_deployment_id": DEPLOYMENT_ID})
    assert start.status_code == 302, start.text
    where = urlsplit(start.headers["Location"])
    assert f"{where.scheme}://{where.netloc}{where.path}" == platform.url + "/authorize"
    preflight = dict(parse_qsl(where.query))
    assert preflight["redirect_uri"] == hub_url + "/hub/lti13/oauth_callback" and preflight["nonce"]
    form = launch(platform.platform, preflight, user, lms_user_id=lms_user_id, **options)
    return browser.post(form.pop("launch_url"), data=form, allow_redirects=False, timeout=30)


def _signed_in_as(hub_url: str, answer: requests.Response) -> str | None:
    """The user the launch's answer signed the browser in as (the hub's login cookie), or ``None``."""
    if "jupyterhub-hub-login" not in answer.cookies:
        return None
    home = requests.get(hub_url + "/hub/home", cookies=answer.cookies, allow_redirects=False, timeout=30)
    assert home.status_code == 200, (home.status_code, home.text[-2000:])
    names = [name for name in ("s001", "s002") if name in home.text]
    assert len(names) == 1, names
    return names[0]


def _users(folder: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(folder / "jupyterhub.sqlite") as db:
        return sorted(name for (name,) in db.execute("select name from users"))


def test_a_roster_student_launched_from_the_lms_signs_in_as_their_student_id(hub):
    url, platform, folder = hub
    answer = _launch(url, platform, "lms-opaque-id-amy", "101")
    assert answer.status_code == 302, answer.text[-2000:]
    assert answer.headers["Location"].startswith("/hub/")
    assert _signed_in_as(url, answer) == "s001"


def test_the_hubs_login_page_stays_the_sign_up_s_and_the_lti_endpoints_are_added(hub):
    url, platform, folder = hub
    page = requests.get(url + "/hub/login", timeout=30)
    assert page.status_code == 200 and 'name="password"' in page.text and "/hub/signup" in page.text
    assert requests.get(url + "/hub/signup", timeout=30).status_code == 200
    assert requests.get(url + "/hub/lti13/oauth_callback", timeout=30).status_code == 405  # launches are POSTs


def test_an_lms_user_the_roster_does_not_know_is_refused_with_a_page_that_says_so(hub):
    url, platform, folder = hub
    answer = _launch(url, platform, "lms-opaque-id-eve", "999")
    assert answer.status_code == 403 and _signed_in_as(url, answer) is None
    page = html.unescape(answer.text)
    assert "Your LMS account (user id 999) is not on this class's roster" in page, page[-2000:]
    assert "add your LMS user id to the roster's canvas_id column" in page
    assert _users(folder) == ["s001", "s002"]  # the roster's, made at the hub's start; no user for the stranger


def test_a_launch_signed_with_another_key_is_refused(hub):
    url, platform, folder = hub
    other = JWK.generate(kty="RSA", size=2048).export_to_pem(private_key=True, password=None).decode()
    answer = _launch(url, platform, "lms-opaque-id-bob", "102", sign_with=other)
    assert answer.status_code == 400 and "Signature verification failed" in answer.text, answer.text[-2000:]
    assert _signed_in_as(url, answer) is None


def test_an_expired_launch_is_refused(hub):
    url, platform, folder = hub
    answer = _launch(url, platform, "lms-opaque-id-bob", "102", expires_in=-120)
    assert answer.status_code == 400 and "Signature has expired" in answer.text, answer.text[-2000:]
    assert _signed_in_as(url, answer) is None


def test_the_same_student_launched_again_is_the_same_user(hub):
    url, platform, folder = hub
    for _ in range(2):
        answer = _launch(url, platform, "lms-opaque-id-bob", "102")
        assert answer.status_code == 302 and _signed_in_as(url, answer) == "s002"
    assert _users(folder) == ["s001", "s002"]


@pytest.mark.parametrize("lab_name", ["lab1", "lab8", "lab17"])
def test_a_labs_lti_link_signs_in_and_lands_in_the_pull_of_that_labs_notebook(hub, lab_name):
    """The target link ``python -m grader links --lti`` prints for a lab (an LMS's link to it) ends, after the
    launch, at that lab's nbgitpuller link on the hub (the pull the handouts' links make, its notebook open)."""
    from grader.author.publish import link, lti_link
    from util.labs import LABS

    url, platform, folder = hub
    notebook = LABS[lab_name].notebook
    answer = _launch(url, platform, "lms-opaque-id-amy", "101", target=lti_link(notebook, hub=url))
    assert answer.status_code == 302 and _signed_in_as(url, answer) == "s001", answer.text[-2000:]
    pull = urlsplit(link(notebook, hub=url))
    landed = urlsplit(answer.headers["Location"])
    assert (landed.path, dict(parse_qsl(landed.query))) == (pull.path, dict(parse_qsl(pull.query)))
    assert dict(parse_qsl(landed.query))["urlpath"] == f"lab/tree/handouts/labs/{notebook}"


def test_two_students_launched_in_chromium_from_the_lms_sign_in_as_themselves(browser_hub, browser):
    """Headless Chromium follows the course's link on the LMS's page (at another site than the hub) through the
    whole launch: the login initiation posted to the hub, the platform's authorisation page, its form posted back
    to the hub, the hub's home; each student is signed in as their roster id, one after the other."""
    from urllib.parse import quote

    url, platform, folder = browser_hub
    platform.tool_login = url + "/hub/lti13/oauth_login"
    platform.users = {"lms-opaque-id-amy": "101", "lms-opaque-id-bob": "102"}
    lms = platform.url.replace("127.0.0.1", "localhost")
    target = quote(url + "/hub/lti13/oauth_login?next=" + quote("/hub/home", safe=""), safe="")
    for hint, student in (("lms-opaque-id-amy", "s001"), ("lms-opaque-id-bob", "s002")):
        browser.open(f"{lms}/course/launch?login_hint={hint}&target={target}")
        home = json.dumps(url + "/hub/home")
        browser.wait(f"return location.href === {home} && document.readyState === 'complete'",
                     f"{student}'s launch did not reach the hub's home", timeout=60, poll=0.2)
        page = browser.text()
        assert student in page and ({"s001", "s002"} - {student}).pop() not in page, page[-1500:]
        browser.open(url + "/hub/logout")
    assert platform.pages == ["/course/launch", "/authorize"] * 2  # the browser went the LMS's way, twice
    assert _users(folder) == ["s001", "s002"]


def test_the_class_servers_own_configuration_takes_launches_beside_its_sign_up(course_hub):
    url, platform, folder = course_hub
    answer = _launch(url, platform, "lms-opaque-id-amy", "101")
    assert answer.status_code == 302 and _signed_in_as(url, answer) == "s001", answer.text[-2000:]
    stranger = _launch(url, platform, "lms-opaque-id-eve", "999")
    assert stranger.status_code == 403 and _signed_in_as(url, stranger) is None
    assert "is not on this class's roster" in html.unescape(stranger.text)
    page = requests.get(url + "/hub/login", timeout=30)
    assert page.status_code == 200 and 'name="password"' in page.text and "/hub/signup" in page.text
