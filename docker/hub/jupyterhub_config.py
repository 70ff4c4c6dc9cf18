# The class server's JupyterHub (docs/hub.md). docker/hub/hub.sh runs it in the hub image, on the host's network,
# with these settings in its environment (hub.sh's defaults in brackets):
#
#   COURSE_HUB_STATE      the hub's folder, the same path on the host and in the hub's container: its database,
#                         cookie secret, roster.csv, handouts.git (published) and collection/ (hand-ins)
#   COURSE_HUB_NAME       the prefix of the students' containers and volumes [course-hub]
#   COURSE_HUB_IMAGE      the students' image [ml-cost-course:hub-student]
#   COURSE_HUB_NETWORK    the students' internal Docker network [course-hub]
#   COURSE_HUB_IP         the host's address on it, where the hub's API and the hand-in receiver listen [172.31.77.1]
#   COURSE_HUB_BIND, COURSE_HUB_PORT   where students' browsers reach the hub [127.0.0.1, 8000]
#   COURSE_HUB_HANDIN_PORT             the hand-in receiver's port on COURSE_HUB_IP [8082]
#   COURSE_HUB_MEM, COURSE_HUB_CPUS    each student's memory and CPU limits [4G, 1]
#   COURSE_HUB_CULL       seconds of inactivity after which a student's server is stopped; 0: never [3600]
#   COURSE_HUB_ADMINS     instructors' user names, comma-separated (they sign up like students) [none]
#   COURSE_HUB_START_TIMEOUT     seconds the hub's start-up may take on a busy machine: the proxy's ports
#                         (docker/hub/patient_proxy.py) and the hand-in receiver, each; hub.sh waits as long [300]
#   COURSE_HUB_SPAWN_TIMEOUT     seconds a student's server may take to start, then to answer [180]
#   COURSE_HUB_SINGLEUSER_ARGS   more flags for every student's server, e.g. --LabApp.expose_app_in_browser=True
#                         (tests/test_hub.py drives JupyterLab through it) [none]
#
# Measured (shared/design/class_server.md) and kept here: the student image needs jupyterhub-singleuser as its
# command (the hub's layer, docker/hub/Dockerfile, sets it), the hub's API must listen on the network's gateway
# (127.0.0.1 inside a container is the container), an internal network publishes no port so the hub reaches each
# server at its internal address, and the host's ports are closed to that network by hub.sh's firewall rules.
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nativeauthenticator import NativeAuthenticator  # noqa: E402
from nativeauthenticator.handlers import LoginHandler as NativeLoginHandler  # noqa: E402
from nativeauthenticator.handlers import SignUpHandler as NativeSignUpHandler  # noqa: E402
from patient_proxy import PatientProxy  # noqa: E402
from roster import student_ids  # noqa: E402
from tornado.escape import url_escape  # noqa: E402
from tornado.httputil import url_concat  # noqa: E402

c = get_config()  # noqa: F821 (JupyterHub's config loader defines it)
env = os.environ.get
STATE = Path(env("COURSE_HUB_STATE", "/srv/hub/state"))
NAME = env("COURSE_HUB_NAME", "course-hub")
HUB_IP = env("COURSE_HUB_IP", "172.31.77.1")
HANDIN_PORT = int(env("COURSE_HUB_HANDIN_PORT", "8082"))
ROSTER = student_ids(STATE / "roster.csv")
ADMINS = {name.strip() for name in env("COURSE_HUB_ADMINS", "").split(",") if name.strip()}
START_TIMEOUT = int(env("COURSE_HUB_START_TIMEOUT", "300"))
"""Every wait of the hub's own start-up, sized for a loaded machine (a hub restarted while a class's kernels run):
JupyterHub's defaults (15 s for the proxy, 30 s for a service) were measured too short at a load of 6."""
SPAWN_TIMEOUT = int(env("COURSE_HUB_SPAWN_TIMEOUT", "180"))
"""A student's server: 5 s to start and answer on a quiet machine, 20-28 s at a load of 15 (docs/hub.md)."""


class _NoTimer:
    """What NativeAuthenticator's login asks of JupyterHub's ``statsd``, which JupyterHub 6 no longer has."""

    def timer(self, name):
        return self

    def start(self):
        return self

    def stop(self, send=True):
        pass


class LoginHandler(NativeLoginHandler):
    """NativeAuthenticator 1.3.0's login page (with its sign-up link) on JupyterHub 6.1.1. Measured: its form
    post fails with ``'LoginHandler' object has no attribute 'statsd'`` (JupyterHub 6 dropped statsd), and
    JupyterHub 6 renders a failed post's error page through ``_render`` with more arguments, synchronously."""

    statsd = _NoTimer()

    def _render(self, login_error=None, username=None, sync=False, **_):
        return self.render_template(
            "native-login.html", sync=sync, next=url_escape(self.get_argument("next", default="")),
            username=username, login_error=login_error, custom_html=self.authenticator.custom_html,
            login_url=self.settings["login_url"], enable_signup=self.authenticator.enable_signup,
            two_factor_auth=self.authenticator.allow_2fa,
            authenticator_login_url=url_concat(self.authenticator.login_url(self.hub.base_url),
                                               {"next": self.get_argument("next", "")}))


class SignUpHandler(NativeSignUpHandler):
    """The sign-up page, saying so when a name is not on the roster (NativeAuthenticator says only "Something
    went wrong", as for a short password)."""

    def get_result_message(self, user, *args):
        alert, message = super().get_result_message(user, *args)
        name = self.authenticator.normalize_username(self.get_body_argument("username", ""))
        if user is None and not (name in self.authenticator.allowed_users or name in self.authenticator.admin_users):
            return "alert-danger", (f"{name!r} is not on this class's roster: sign up with your student id, as your "
                                    "instructor gave it (in lower case)")
        return alert, message


class RosterAuthenticator(NativeAuthenticator):
    """NativeAuthenticator (user names and passwords in the hub's database, a sign-up page) whose sign-up takes
    only the roster's ids and the instructors' names: anyone else's sign-up is refused, and so is their
    login. A student on the roster signs up once, choosing a password, and is let in at once."""

    def validate_username(self, username):
        return super().validate_username(username) and (username in self.allowed_users or username in self.admin_users)

    def get_handlers(self, app):
        ours = {NativeLoginHandler: LoginHandler, NativeSignUpHandler: SignUpHandler}
        return [(path, ours.get(handler, handler)) for path, handler in super().get_handlers(app)]


c.JupyterHub.authenticator_class = RosterAuthenticator
c.Authenticator.allowed_users = set(ROSTER)
c.Authenticator.admin_users = ADMINS
c.Authenticator.allow_existing_users = False   # the roster decides: a student taken off it can no longer sign in
c.NativeAuthenticator.open_signup = True   # a sign-up that passes the roster's check is let in at once
c.NativeAuthenticator.minimum_password_length = 8
c.NativeAuthenticator.check_common_password = True
c.NativeAuthenticator.allowed_failed_logins = 10
c.NativeAuthenticator.seconds_before_next_try = 60

LTI = STATE / "lti_launch.json"
"""The LMS's registration for LTI 1.3 launches (docs/lms.md); without it, the roster's sign-up alone."""
if LTI.is_file():   # LTI 1.3 launches beside the sign-up: the LMS's user mapped to the roster (docker/hub/lti_login.py)
    import json

    from lti_login import beside

    lti = json.loads(LTI.read_text())
    c.JupyterHub.authenticator_class = beside(RosterAuthenticator)
    c.RosterLTI13Authenticator.issuer = lti["issuer"]
    c.RosterLTI13Authenticator.client_id = [lti["client_id"]]
    c.RosterLTI13Authenticator.authorize_url = lti["authorize_url"]
    c.RosterLTI13Authenticator.jwks_endpoint = lti["jwks_url"]
    c.RosterLTI13Authenticator.roster = str(STATE / "roster.csv")
    c.RosterLTI13Authenticator.user_id_column = lti.get("user_id_column", "canvas_id")
    c.RosterLTI13Authenticator.user_id_claim = lti.get("user_id_claim", "custom_lms_user_id")
    c.RosterLTI13Authenticator.uri_scheme = lti.get("uri_scheme", "auto")

c.JupyterHub.ip = env("COURSE_HUB_BIND", "127.0.0.1")
c.JupyterHub.port = int(env("COURSE_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = HUB_IP
c.JupyterHub.hub_port = 8081
c.JupyterHub.proxy_class = PatientProxy   # configurable-http-proxy, waited for START_TIMEOUT s, not 15
c.PatientProxy.start_timeout = START_TIMEOUT
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:8001"
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")
c.JupyterHub.cleanup_servers = False   # restarting the hub (a roster change) leaves students' servers running

c.JupyterHub.spawner_class = "docker"
c.DockerSpawner.image = env("COURSE_HUB_IMAGE", "ml-cost-course:hub-student")
c.DockerSpawner.pull_policy = "never"          # built here (hub.sh build); no registry needed
c.DockerSpawner.remove = True                  # the container goes when the server stops; the volume stays
c.DockerSpawner.prefix = NAME
c.DockerSpawner.network_name = env("COURSE_HUB_NETWORK", "course-hub")
c.DockerSpawner.use_internal_ip = True
c.DockerSpawner.notebook_dir = "/home/student"
c.DockerSpawner.volumes = {
    NAME + "-user-{username}": "/home/student",                     # the student's work: survives restarts
    str(STATE / "handouts.git"): {"bind": "/srv/handouts.git", "mode": "ro"},   # what the links pull
}
c.DockerSpawner.mem_limit = env("COURSE_HUB_MEM", "4G")
c.DockerSpawner.cpu_limit = float(env("COURSE_HUB_CPUS", "1"))
c.DockerSpawner.environment = {
    "SHELL": "/bin/bash",                                              # terminals open bash, not sh
    "COURSE_HANDIN_URL": f"http://{HUB_IP}:{HANDIN_PORT}/handin",       # `handin labN` posts here
    "PYTHONPATH": "/home/student/handouts",   # the pulled util/ and grader/ (a course update) before the image's
}
c.DockerSpawner.extra_create_kwargs = {"labels": {"ml-cost-course.hub": "student", "ml-cost-course.user": "{username}"}}
c.DockerSpawner.extra_host_config = {
    "cap_drop": ["ALL"],                        # the student is uid 1000 and needs no capability
    "security_opt": ["no-new-privileges"],
    "pids_limit": 1024,
}
c.Spawner.default_url = "/lab"
c.Spawner.args = env("COURSE_HUB_SINGLEUSER_ARGS", "").split()
c.Spawner.start_timeout = SPAWN_TIMEOUT   # DockerSpawner's container created and started
c.Spawner.http_timeout = SPAWN_TIMEOUT    # then jupyterhub-singleuser answering in it
c.JupyterHub.init_spawners_timeout = 10   # JupyterHub's: students' servers still checked after it, in the background

cull = int(env("COURSE_HUB_CULL", "3600"))
c.JupyterHub.services = [
    {   # hand-ins: docker/hub/handin_service.py, listening where the students' servers reach it
        "name": "handin",
        "url": f"http://{HUB_IP}:{HANDIN_PORT}",
        "timeout": START_TIMEOUT,   # JupyterHub waits 30 s for it, then exits: not enough on a busy machine
        "command": [sys.executable, str(Path(__file__).resolve().parent / "handin_service.py"),
                    "--collection", str(STATE / "collection")],
    },
]
c.JupyterHub.load_roles = []
if cull:
    c.JupyterHub.services.append({"name": "idle-culler", "command": [
        sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={cull}", "--cull-every=300"]})
    c.JupyterHub.load_roles.append({"name": "idle-culler", "services": ["idle-culler"],
                                    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]})
