"""``python -m grader lti config``: what the LMS's registration of the course as an LTI 1.3 tool asks for.

``python -m grader lti config --out build/gradebook --url https://hub.example.edu --format canvas`` prints the
JSON that Canvas's developer key takes (Admin > Developer Keys > + LTI Key > Method: Paste JSON);
``--format moodle`` prints the fields of Moodle's external tool form (Site administration > Plugins > Activity
modules > External tool > Manage tools > configure a tool manually), one per line. Both carry the tool's public
key, made the first time (``OUT/lti_key.json``, :mod:`grader.lti.registration`); the key's private half never
leaves the class folder. The URLs are those the class server's LTI 1.3 login answers on
(jupyterhub-ltiauthenticator 1.6.3's: the login initiation ``/hub/lti13/oauth_login``, the redirect URI the
launch is posted to ``/hub/lti13/oauth_callback``; the launch's target is the hub, ``/hub``). Grades need only
the key, since the tool asks the LMS for its tokens.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import urlsplit

from grader.lti.ags import SCOPES
from grader.lti.registration import KEY, RegistrationError, ToolKey, tool_key

FORMATS = ("canvas", "moodle")
TITLE = "ML systems lab course"


def urls(hub: str) -> dict[str, str]:
    """The class server's LTI 1.3 endpoints (jupyterhub-ltiauthenticator's), under the hub's address ``hub``: the
    login initiation, the redirect URI (where the platform posts the launch), the launch's target."""
    base = hub.rstrip("/")
    return {"login": f"{base}/hub/lti13/oauth_login", "redirect": f"{base}/hub/lti13/oauth_callback",
            "launch": f"{base}/hub"}


def canvas(hub: str, key: ToolKey, title: str = TITLE) -> dict:
    """Canvas's developer key, as its "Paste JSON" takes it (the LTI 1.3 tool configuration)."""
    at = urls(hub)
    return {
        "title": title,
        "description": "Jupyter labs of the course, graded by its autograder; scores sent back to the gradebook",
        "oidc_initiation_url": at["login"],
        "target_link_uri": at["launch"],
        "scopes": SCOPES,
        "extensions": [{
            "domain": urlsplit(hub).hostname or "",
            "tool_id": "ml-cost-course",
            "platform": "canvas.instructure.com",
            "privacy_level": "public",
            "settings": {"text": title, "placements": [{
                "placement": "course_navigation", "message_type": "LtiResourceLinkRequest",
                "target_link_uri": at["launch"], "windowTarget": "_blank"}]},
        }],
        "public_jwk": key.public_jwk(),
        "custom_fields": {"lms_user_id": "$Canvas.user.id", "sis_user_id": "$Person.sourcedId"},
    }


def moodle(hub: str, key: ToolKey, title: str = TITLE) -> list[tuple[str, str]]:
    """Moodle's "Add external tool configuration" form: (field, value), in the form's order."""
    at = urls(hub)
    return [("Tool name", title), ("Tool URL", at["launch"]), ("LTI version", "LTI 1.3"),
            ("Public key type", "RSA key"), ("Public key", key.public_pem().strip()),
            ("Initiate login URL", at["login"]), ("Redirection URI(s)", at["redirect"]),
            ("Custom parameters", "lms_user_id=$User.id\nsis_user_id=$Person.sourcedId"),
            ("Services > IMS LTI Assignment and Grade Services", "Use this service for grade sync and column "
             "management"),
            ("Privacy > Share launcher's name / email with tool", "Always / Always")]


def main(*, out: Path, hub: str, fmt: str = "canvas", title: str = TITLE, file: Path | None = None) -> int:
    """Print (or write to ``file``) the tool's configuration for the LMS ``fmt``: 0 done, 2 nothing to print."""
    parts = urlsplit(hub)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment:
        print(f"grader: --url {hub!r}: expected the class server's address, e.g. https://hub.example.edu "
              "(the one students open)", file=sys.stderr)
        return 2
    fresh = not (Path(out) / KEY).is_file()
    try:
        key = tool_key(out, create=True)
    except RegistrationError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    if fresh:
        print(f"grader: made the tool's key {Path(out) / KEY} (keep it; the LMS gets its public half, below)",
              file=sys.stderr)
    if fmt == "canvas":
        text = json.dumps(canvas(hub, key, title), indent=2) + "\n"
    else:
        text = "".join(f"{name}:\n{value}\n\n" for name, value in moodle(hub, key, title))
    if file:
        file.write_text(text)
        print(f"{file}: the {fmt} registration of the tool")
    else:
        sys.stdout.write(text)
    return 0
