"""The LMS's registration of the course as an LTI 1.3 tool (``OUT/lti.json``), and the tool's signing key.

An instructor registers the tool in the LMS (Canvas: a developer key; Moodle: an external tool), which gives a
client id, a deployment id and the platform's URLs; they are written into ``OUT/lti.json`` of the class folder::

    {"issuer": "https://canvas.instructure.com",
     "client_id": "10000000000042",
     "deployment_id": "7:0123abcd",
     "token_url": "https://canvas.example.edu/login/oauth2/token",
     "lineitems_url": "https://canvas.example.edu/api/lti/courses/42/line_items",
     "user_id_column": "canvas_id"}

``user_id_column`` names the roster column that holds the LMS's id of each student, the ``userId`` a score is
posted for (Canvas accepts its user id, the roster's ``canvas_id``; Moodle its user id: give it as ``login_id``).
``audience`` (the token request's ``aud``, when the LMS wants another than ``token_url``) and ``key`` (the key
file, default ``lti_key.json`` beside it) are optional.

The tool signs its token requests with an RSA key of its own (LTI 1.3's client-credentials grant with a signed
JWT); the LMS checks them with the public half, given to it at registration (``python -m grader lti config``
prints it). :func:`tool_key` makes the key the first time (``OUT/lti_key.json``, readable by its owner only).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path

from grader.core.namespace import class_file
from grader.report.roster import COLUMNS

REGISTRATION = "lti.json"
"""The registration's file in the class folder."""
KEY = "lti_key.json"
"""The tool's private key's file in the class folder (unless the registration names another)."""
USER_COLUMNS = tuple(c for c in COLUMNS if c not in ("name", "submission", "section"))
"""Roster columns that may hold the LMS's user id."""


class RegistrationError(ValueError):
    """A registration that cannot be used; the message says what is missing and what to do."""


@dataclass(frozen=True)
class Registration:
    """What the LMS said when it registered the tool."""

    issuer: str
    """The platform's ``iss`` (Canvas: ``https://canvas.instructure.com``; Moodle: the site's address)."""
    client_id: str
    """The tool's client id at the platform (Canvas: the developer key's number)."""
    deployment_id: str
    """The deployment of the tool in the course (Canvas: shown in the app's settings; Moodle: the tool's)."""
    token_url: str
    """The platform's OAuth2 access-token URL."""
    lineitems_url: str
    """The course's line items (AGS's ``lineitems`` endpoint)."""
    user_id_column: str = "canvas_id"
    """The roster column holding each student's LMS user id (one of :data:`USER_COLUMNS`)."""
    audience: str = ""
    """The ``aud`` of the token request, when it is not ``token_url`` (Moodle and Canvas: leave empty)."""
    key: str = KEY
    """The tool's private key file, relative to the class folder."""

    @classmethod
    def load(cls, out: Path) -> Registration:
        """``OUT/lti.json``, checked; :class:`RegistrationError` says what to write when it is missing or wrong."""
        path = class_file(out, REGISTRATION)
        if not path.is_file():
            raise RegistrationError(f"{path}: no LTI registration; write it with the client id, deployment id and "
                                    "URLs the LMS gave when you registered the tool (see docs/lms.md)")
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise RegistrationError(f"{path}: not readable JSON ({exc}); fix the file") from None
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(names)) if isinstance(data, dict) else []
        missing = [n for n in names[:5] if not isinstance(data, dict) or not str(data.get(n) or "").strip()]
        if not isinstance(data, dict) or unknown or missing:
            raise RegistrationError(f"{path}: expected the keys {', '.join(names)}; "
                                    + (f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(unknown)}"))
        reg = cls(**{k: str(v).strip() for k, v in data.items()})
        if reg.user_id_column not in USER_COLUMNS:
            raise RegistrationError(f"{path}: user_id_column {reg.user_id_column!r}: expected one of "
                                    f"{', '.join(USER_COLUMNS)} (the roster column with the LMS's user ids)")
        return reg


@dataclass(frozen=True)
class ToolKey:
    """The tool's RSA key: the private half signs, the public half (a JWK) goes to the LMS."""

    kid: str
    """The key's id, in every JWT's header, so the LMS picks the right public key."""
    private_pem: str

    def public_jwk(self) -> dict:
        """The public key as a JSON Web Key (what Canvas's developer key and Moodle's "public key" take)."""
        from jwcrypto.jwk import JWK

        jwk = JWK.from_pem(self.private_pem.encode())
        return {**json.loads(jwk.export_public()), "kid": self.kid, "alg": "RS256", "use": "sig"}

    def public_pem(self) -> str:
        from jwcrypto.jwk import JWK

        return JWK.from_pem(self.private_pem.encode()).export_to_pem().decode()


def tool_key(out: Path, name: str = KEY, *, create: bool = False) -> ToolKey:
    """The tool's key in the class folder ``out``; made (2048-bit RSA) when ``create`` and there is none."""
    path = Path(out) / name
    if not path.is_file():
        if not create:
            raise RegistrationError(f"{path}: no tool key; `python -m grader lti config --out {out}` makes one, "
                                    "then give its public key to the LMS")
        from jwcrypto.jwk import JWK

        jwk = JWK.generate(kty="RSA", size=2048)
        key = ToolKey(jwk.thumbprint(), jwk.export_to_pem(private_key=True, password=None).decode())
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"kid": key.kid, "private_key": key.private_pem}, handle, indent=1)
        return key
    try:
        data = json.loads(path.read_text())
        return ToolKey(str(data["kid"]), str(data["private_key"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RegistrationError(f"{path}: expected {{\"kid\": ..., \"private_key\": PEM}} ({exc!r}); restore the "
                                "file, or delete it and register the new key that `lti config` makes") from None
