"""The handouts on a class server: the students' copy published as a git repository, and the nbgitpuller
links that pull it into each student's server (docs/hub.md).

* ``python -m grader publish REPO.git`` writes the students' copy (:func:`grader.author.release.release`)
  and commits it as the next commit of the repository's branch (a bare repository, made when absent).
  Nothing else goes in: the commit's tree is exactly the copy, so a file the course dropped is dropped
  for students too. Publishing an unchanged course commits nothing.
* ``python -m grader links --hub URL`` prints one nbgitpuller link per lab. A student who opens it gets the
  repository cloned into ``~/handouts`` the first time and pulled on every later click, with the lab's
  notebook opened in JupyterLab.

**What a pull does to a student's work** (nbgitpuller 1.3.0; measured in ``shared/design/class_server.md``
and by ``tests/test_hub.py``): it commits the student's changes, then merges the course's with git's
``-Xours``, line by line of the notebook's JSON. Where the course changed a line the student also changed
(or one next to it), the student's wins and the course's change is dropped, without a word; the course's
changes elsewhere arrive, in the same cell too. Files they did not touch are updated; a file of theirs that
the course now adds too is renamed aside. So errata to a cell students work in must go into a new cell or
a new file. :func:`publish` lists every cell of an earlier release whose source changed
(:attr:`Published.edited_cells`) and the command prints a warning for each.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

from grader.author import release
from util.labs import LABS

BRANCH = "main"
"""The branch students pull."""
TARGET = "handouts"
"""The folder of each student's home that nbgitpuller clones into (``targetpath``)."""
REPO_IN_CONTAINER = "file:///srv/handouts.git"
"""Where ``docker/hub`` mounts the published repository, read-only, in every student's container."""
HUB = "http://127.0.0.1:8000"
"""``docker/hub/hub.sh``'s address when none is given."""
AUTHOR = ("course publisher", "course@localhost")
"""The commits' author and committer (name, email)."""


class PublishError(RuntimeError):
    """Publishing failed; the message says what was found and what to do."""


def _git(*args: str, git_dir: Path, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """``git --git-dir=GIT_DIR ARGS`` with the course's identity; raises :class:`PublishError` when it fails."""
    name, email = AUTHOR
    environ = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
               "GIT_COMMITTER_EMAIL": email, "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    try:
        done = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, env=environ)
    except FileNotFoundError:
        raise PublishError("git is not installed: install it (apt-get install git) and publish again") from None
    if check and done.returncode != 0:
        raise PublishError(f"git {' '.join(args[:2])} failed in {git_dir}: {(done.stderr or done.stdout).strip()}")
    return done


def _head(repo: Path, branch: str) -> str | None:
    done = _git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", git_dir=repo, check=False)
    return done.stdout.strip() or None


def _notebook_sources(repo: Path, commit: str) -> dict[str, dict[str, str]]:
    """Notebook path -> {cell id -> source} of every notebook under ``labs/`` at ``commit``."""
    listing = _git("ls-tree", "-r", "--name-only", commit, "--", "labs", git_dir=repo).stdout.splitlines()
    found = {}
    for path in (p for p in listing if p.endswith(".ipynb")):
        try:
            cells = json.loads(_git("show", f"{commit}:{path}", git_dir=repo).stdout).get("cells", [])
        except (ValueError, AttributeError):
            continue
        found[path] = {c["id"]: "".join(c.get("source", "")) for c in cells if isinstance(c, dict) and c.get("id")}
    return found


def edited_cells(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[tuple[str, str]]:
    """(notebook, cell id) of every cell present in both releases whose source changed: the cells whose
    change a student who edited them never receives (nbgitpuller merges with ``-Xours``)."""
    return [(path, cell) for path, cells in sorted(after.items()) for cell, source in cells.items()
            if path in before and cell in before[path] and before[path][cell] != source]


@dataclass(frozen=True)
class Published:
    """What one ``publish`` did."""

    repo: Path
    """The bare repository."""
    commit: str
    """The branch's commit after publishing (the new one, or the unchanged one)."""
    previous: str | None
    """The branch's commit before publishing; ``None`` for the first release."""
    files: int
    """Files in the published tree."""
    edited_cells: list[tuple[str, str]] = field(default_factory=list)
    """(notebook, cell id) of each cell of the previous release whose source this one changes."""

    @property
    def changed(self) -> bool:
        """Whether a new commit was made."""
        return self.commit != self.previous


def publish(repo: Path, branch: str = BRANCH, message: str | None = None) -> Published:
    """Write the students' copy and commit it to ``branch`` of the bare repository ``repo`` (made when absent).

    The commit's tree is the copy and nothing else. When the tree equals the branch's, nothing is
    committed. Raises :class:`PublishError` (git missing or failing, ``repo`` not a bare repository)."""
    repo = Path(repo).resolve()
    if not repo.exists():
        repo.parent.mkdir(parents=True, exist_ok=True)
        _git("init", "--bare", "--quiet", f"--initial-branch={branch}", git_dir=repo)
    elif _git("rev-parse", "--is-bare-repository", git_dir=repo, check=False).stdout.strip() != "true":
        raise PublishError(f"{repo} is not a bare git repository: give a new path (it is made) or one that "
                           "`publish` made before")
    previous = _head(repo, branch)
    with tempfile.TemporaryDirectory(prefix="course-publish-") as scratch:
        copy = Path(scratch) / "copy"
        files = release.release(copy)
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index"), "GIT_WORK_TREE": str(copy)}
        _git("add", "--all", "--force", ".", git_dir=repo, env=env)
        tree = _git("write-tree", git_dir=repo, env=env).stdout.strip()
        if previous and _git("rev-parse", f"{previous}^{{tree}}", git_dir=repo).stdout.strip() == tree:
            return Published(repo, previous, previous, len(files))
        text = message or f"The course's handouts, published by python -m grader publish ({len(files)} files)"
        commit = _git("commit-tree", tree, *(["-p", previous] if previous else []), "-m", text,
                      git_dir=repo, env=env).stdout.strip()
        _git("update-ref", f"refs/heads/{branch}", commit, *([previous] if previous else []), git_dir=repo)
    # A dumb-HTTP server of the repository needs this after each push (nbgitpuller over http: depth=0).
    _git("update-server-info", git_dir=repo)
    edited = edited_cells(_notebook_sources(repo, previous), _notebook_sources(repo, commit)) if previous else []
    return Published(repo, commit, previous, len(files), edited)


def link(notebook: str, hub: str = HUB, repo: str = REPO_IN_CONTAINER, branch: str = BRANCH,
         target: str = TARGET) -> str:
    """The nbgitpuller link that pulls ``repo`` into ``~/target`` and opens ``labs/<notebook>`` in JupyterLab.

    ``hub`` is the hub's public address (with its base URL, if any). The repository URL is the one the
    *students' servers* clone from: ``file:///srv/handouts.git`` on ``docker/hub``, the git host's https
    address on Kubernetes."""
    query = urlencode({"repo": repo, "branch": branch, "targetpath": target,
                       "urlpath": f"lab/tree/{target}/labs/{notebook}"}, quote_via=quote, safe="")
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"


LTI_LOGIN = "/hub/lti13/oauth_login"
"""The hub's LTI 1.3 login initiation (jupyterhub-ltiauthenticator's), where an LMS's launch of the course starts."""


def lti_link(notebook: str, hub: str = HUB, repo: str = REPO_IN_CONTAINER, branch: str = BRANCH,
             target: str = TARGET) -> str:
    """The LTI 1.3 target link of one lab: what an LMS's link to the lab (a Canvas assignment's or a Moodle
    activity's tool URL) holds, so that a student launched from it signs in (docker/hub/lti_login.py) and lands
    in :func:`link`'s pull of the lab, its notebook open.

    jupyterhub-ltiauthenticator 1.6.3 reads the page to open after the launch from ``next=`` in the target link
    the platform sends with the login initiation (everything after it, unquoted once, kept as a path on the hub),
    so the nbgitpuller link's path goes there, quoted whole."""
    pull = urlsplit(link(notebook, hub, repo, branch, target))
    return f"{hub.rstrip('/')}{LTI_LOGIN}?next={quote(pull.path + '?' + pull.query, safe='')}"


def links(hub: str = HUB, repo: str = REPO_IN_CONTAINER, branch: str = BRANCH, target: str = TARGET,
          labs: list[str] | None = None, lti: bool = False) -> list[tuple[str, str, str]]:
    """(lab, title, link) for each lab (``labs``: only these), in course order; ``lti``: the labs' LTI target
    links (:func:`lti_link`) in place of the nbgitpuller links."""
    chosen = [LABS[name] for name in labs] if labs else list(LABS.values())
    make = lti_link if lti else link
    return [(lab.name, lab.title, make(lab.notebook, hub, repo, branch, target)) for lab in chosen]


def main_publish(*, repo: Path, branch: str = BRANCH, message: str | None = None) -> int:
    """``python -m grader publish REPO.git``: publish and say what changed."""
    try:
        done = publish(repo, branch, message)
    except (PublishError, FileExistsError, ValueError) as exc:
        print(f"publish: {exc}", file=sys.stderr)
        return 1
    if not done.changed:
        print(f"publish: nothing changed since {done.commit[:12]} on {branch} of {done.repo}; nothing committed")
        return 0
    first = "the first release" if done.previous is None else f"after {done.previous[:12]}"
    print(f"published the students' copy ({done.files} files) to {done.repo}, branch {branch}: commit "
          f"{done.commit[:12]} ({first}). Students get it by opening a lab's link again "
          "(python -m grader links).")
    for notebook, cell in done.edited_cells:
        print(f"publish: warning: {notebook} cell {cell} changed since the last release. Students who edited "
              "that cell near the changed lines keep their own lines and never see this change (nbgitpuller keeps "
              "theirs): publish errata in a new cell or a new file", file=sys.stderr)
    return 0


def main_links(*, hub: str, repo: str, branch: str, target: str, labs: list[str] | None, lti: bool = False) -> int:
    """``python -m grader links``: one line per lab, ``labN  link  title`` (``--lti``: the LMS's target links)."""
    rows = links(hub, repo, branch, target, labs, lti)
    width = max(len(name) for name, _, _ in rows)
    for name, title, url in rows:
        print(f"{name:<{width}}  {url}  {title}")
    return 0
