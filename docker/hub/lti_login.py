"""The class server's LTI 1.3 login: a student launched from the LMS signs in as their roster ``student_id``.

jupyterhub-ltiauthenticator 1.6.3's ``LTI13Authenticator`` does the protocol: the OIDC login initiation
(``/hub/lti13/oauth_login``), then the launch (``/hub/lti13/oauth_callback``), whose id_token it checks (the
platform's signature through its JWKS, issuer, audience and ``azp`` = the tool's client id, expiry, the nonce and
state of this login, the LTI message's claims). This class only says who the launched person is: the LMS's user
id the launch carries (``user_id_claim``: ``custom_lms_user_id``, the custom field ``python -m grader lti config``
registers, or ``sub``) looked up in the roster's ``user_id_column`` (the same column ``python -m grader lti post``
sends scores for: ``canvas_id`` for Canvas, ``login_id`` for Moodle's user id). Someone the roster does not know
is refused with a page that says so and what to do. The JupyterHub user name is the roster's ``student_id``, so
the student's server, volume and hand-ins are those the roster's sign-up gives them.

:func:`beside` makes one authenticator class of another login (the roster's sign-up, NativeAuthenticator) and
this one: JupyterHub takes a single class, so the hub's login page and sign-up stay the other's, and the LTI
endpoints are added. ``jupyterhub_config.py`` uses it when the hub's folder holds ``lti_launch.json`` (docs/lms.md).
"""
from __future__ import annotations

import csv
from pathlib import Path

from ltiauthenticator.lti13.auth import LTI13Authenticator
from ltiauthenticator.lti13.constants import LTI13_CUSTOM_CLAIM
from ltiauthenticator.lti13.handlers import LTI13CallbackHandler
from roster import STUDENT_ID
from tornado.web import HTTPError
from traitlets import Unicode


class RosterLTI13Authenticator(LTI13Authenticator):
    """LTI 1.3 launches, each mapped to the roster's ``student_id`` by the LMS's user id."""

    roster = Unicode(config=True, help="The class roster (CSV with student_id and the user_id_column).")
    user_id_column = Unicode("canvas_id", config=True,
                             help="The roster column holding each student's LMS user id.")
    user_id_claim = Unicode("custom_lms_user_id", config=True,
                            help="Where the launch carries the LMS's user id: 'sub', or 'custom_NAME' for the "
                                 "custom parameter NAME.")

    def lms_user_id(self, token: dict) -> str:
        """The LMS's user id in a validated launch (its id_token's claims)."""
        if self.user_id_claim.startswith("custom_"):
            value = (token.get(LTI13_CUSTOM_CLAIM) or {}).get(self.user_id_claim[len("custom_"):])
        else:
            value = token.get(self.user_id_claim)
        return str(value or "").strip()

    def student_id(self, lms_user_id: str) -> str | None:
        """The roster's ``student_id`` of the student whose ``user_id_column`` is ``lms_user_id`` (read each
        time: a roster edited during term counts at once), or ``None``."""
        if not lms_user_id:
            return None
        with Path(self.roster).open(encoding="utf-8-sig", newline="") as handle:
            for row in csv.DictReader(handle):
                row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
                sid = row.get("student_id", "")
                if row.get(self.user_id_column) == lms_user_id and STUDENT_ID.fullmatch(sid):
                    return sid
        return None

    async def authenticate(self, handler, data: dict | None = None) -> dict:
        lms_id = self.lms_user_id(data or {})
        sid = self.student_id(lms_id)
        if sid is None:
            raise HTTPError(403, "Your LMS account (user id %s) is not on this class's roster. Ask your instructor "
                            "to add your LMS user id to the roster's %s column.", lms_id or "(none sent)",
                            self.user_id_column)
        return {"name": sid, "auth_state": None}


def beside(other: type) -> type:
    """One authenticator class that is ``other`` (its login page and handlers: the roster's sign-up) and also
    takes LTI 1.3 launches the way :class:`RosterLTI13Authenticator` does (configured as that class)."""

    class Beside(other, RosterLTI13Authenticator):
        __doc__ = f"{other.__name__}'s login, and LTI 1.3 launches mapped to the roster."

        def login_url(self, base_url):
            return other.login_url(self, base_url)

        def get_handlers(self, app):
            mine = RosterLTI13Authenticator
            lti = [(mine.login_url(self, ""), mine.login_handler),  # not self.login_url: that is the other login's
                   (mine.callback_url(self, ""), mine.callback_handler),
                   (mine.config_json_url(self, ""), mine.config_handler)]
            return [*other.get_handlers(self, app), *lti]

        async def authenticate(self, handler, data=None):
            if isinstance(handler, LTI13CallbackHandler):
                return await RosterLTI13Authenticator.authenticate(self, handler, data)
            return await other.authenticate(self, handler, data)

    Beside.__name__ = Beside.__qualname__ = f"{other.__name__}WithLTI13"
    return Beside
