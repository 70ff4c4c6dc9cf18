"""``python -m grader publish`` and ``links``: the students' copy as a git repository nbgitpuller pulls, and each
lab's link (docs/hub.md). No Docker: the repository is read with git here; tests/test_hub.py pulls it for real."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from grader import cli
from grader.author import publish, release
from util.labs import LABS

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A repository published twice from this checkout (the second time: nothing changed)."""
    repo = tmp_path_factory.mktemp("publish") / "handouts.git"
    return repo, publish.publish(repo), publish.publish(repo)


def test_the_repository_holds_exactly_the_students_copy_on_main(published):
    repo, first, _ = published
    assert first.previous is None and first.changed and len(first.commit) == 40
    assert _git(repo, "rev-parse", "--is-bare-repository").strip() == "true"
    assert _git(repo, "rev-parse", "refs/heads/main").strip() == first.commit
    tree = sorted(_git(repo, "ls-tree", "-r", "--name-only", "main").splitlines())
    expected = sorted([*release.student_files(), "README.md"])
    assert tree == expected and first.files == len(expected) > 100
    for lab in LABS.values():
        assert f"labs/{lab.notebook}" in tree
    assert not [p for p in tree if p.startswith(("solutions/", "grader/references/", "grader/examples/", "tests/"))]
    assert (repo / "info" / "refs").is_file()   # update-server-info: a dumb-HTTP server of it works too


def test_publishing_an_unchanged_course_commits_nothing(published, capsys):
    repo, first, second = published
    assert not second.changed and second.commit == second.previous == first.commit
    assert _git(repo, "rev-list", "--count", "main").strip() == "1"
    assert cli.main(["publish", str(repo)]) == 0
    assert f"nothing changed since {first.commit[:12]}" in capsys.readouterr().out


def test_a_changed_course_is_the_next_commit_and_edited_cells_are_warned_about(tmp_path, monkeypatch, capsys):
    """The second release's commit has the first as parent; a cell that existed and changed is named (students who
    edited it keep their own version under nbgitpuller's merge), a new cell is not."""
    repo = tmp_path / "handouts.git"
    first = publish.publish(repo)
    lab = LABS["lab1"]
    real = release.release

    def changed_release(dest):   # the course as released, with lab 1's task 1.1 cell and a new cell changed
        files = real(dest)
        path = Path(dest) / "labs" / lab.notebook
        nb = json.loads(path.read_text())
        nb["cells"][3]["source"] = ["# errata: count every parameter once\n", *nb["cells"][3]["source"]]
        nb["cells"].append({"cell_type": "markdown", "id": "errata-1", "metadata": {}, "source": ["Errata."]})
        path.write_text(json.dumps(nb, indent=1))
        (Path(dest) / "labs" / "ERRATA.md").write_text("Errata.\n")
        return [*files, Path(dest) / "labs" / "ERRATA.md"]

    monkeypatch.setattr(release, "release", changed_release)
    assert cli.main(["publish", str(repo), "--message", "Errata for lab 1"]) == 0
    out, err = capsys.readouterr()
    head = _git(repo, "rev-parse", "main").strip()
    assert _git(repo, "rev-parse", "main^").strip() == first.commit
    assert _git(repo, "log", "-1", "--format=%s", "main").strip() == "Errata for lab 1"
    assert f"commit {head[:12]} (after {first.commit[:12]})" in out
    cell = json.loads(_git(repo, "show", f"{first.commit}:labs/{lab.notebook}"))["cells"][3]["id"]
    assert err.count("warning:") == 1 and f"labs/{lab.notebook} cell {cell} changed" in err
    assert "labs/ERRATA.md" in _git(repo, "ls-tree", "-r", "--name-only", "main")


def test_edited_cells_are_the_changed_cells_both_releases_hold():
    before = {"labs/a.ipynb": {"x": "1", "y": "2"}, "labs/gone.ipynb": {"z": "3"}}
    after = {"labs/a.ipynb": {"x": "1", "y": "2 (fixed)", "new": "4"}, "labs/b.ipynb": {"y": "5"}}
    assert publish.edited_cells(before, after) == [("labs/a.ipynb", "y")]


def test_a_folder_that_is_not_a_bare_repository_is_refused(tmp_path, capsys):
    (tmp_path / "work").mkdir()
    subprocess.run(["git", "init", "-q", str(tmp_path / "work")], check=True)
    assert cli.main(["publish", str(tmp_path / "work")]) == 1
    assert "is not a bare git repository" in capsys.readouterr().err


def test_each_labs_link_pulls_the_repository_into_handouts_and_opens_its_notebook(capsys):
    """The link of the measured recipe (shared/design/class_server.md), for every lab: repo, branch, targetpath
    (nbgitpuller reads only this spelling) and urlpath, percent-encoded, behind the hub's user-redirect."""
    assert publish.link("lab1_pytorch_analysis.ipynb") == (
        "http://127.0.0.1:8000/hub/user-redirect/git-pull?repo=file%3A%2F%2F%2Fsrv%2Fhandouts.git&branch=main"
        "&targetpath=handouts&urlpath=lab%2Ftree%2Fhandouts%2Flabs%2Flab1_pytorch_analysis.ipynb")
    assert cli.main(["links", "--hub", "https://hub.example.edu/course/", "--repo",
                     "https://git.example.edu/course/handouts.git"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(LABS)
    for line, lab in zip(lines, LABS.values()):
        url = urlsplit(line.split()[1])
        assert (url.scheme, url.netloc, url.path) == ("https", "hub.example.edu", "/course/hub/user-redirect/git-pull")
        assert parse_qs(url.query) == {"repo": ["https://git.example.edu/course/handouts.git"], "branch": ["main"],
                                       "targetpath": ["handouts"], "urlpath": [f"lab/tree/handouts/labs/{lab.notebook}"]}
        assert line.endswith(lab.title)
    assert cli.main(["links", "--lab", "lab4"]) == 0
    [only] = capsys.readouterr().out.splitlines()
    assert "urlpath=lab%2Ftree%2Fhandouts%2Flabs%2Flab4_libtorch%2Flab4_libtorch.ipynb" in only


def test_each_labs_lti_link_is_the_hubs_lti_login_with_the_labs_pull_as_its_next_page(capsys):
    """``links --lti``: for an LMS's link to each lab, the hub's LTI 1.3 login initiation whose ``next`` (one
    parameter, everything after it unquoted once, as jupyterhub-ltiauthenticator reads it) is the lab's pull path
    on the same hub; tests/test_hub_lti.py follows one through a real launch."""
    hub, repo = "https://hub.example.edu/course/", "https://git.example.edu/course/handouts.git"
    assert cli.main(["links", "--lti", "--hub", hub, "--repo", repo]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(LABS)
    for line, lab in zip(lines, LABS.values()):
        url = urlsplit(line.split()[1])
        assert (url.scheme, url.netloc, url.path) == ("https", "hub.example.edu", "/course/hub/lti13/oauth_login")
        assert url.query.startswith("next=") and url.query.count("=") == 1 and "&" not in url.query
        pull = urlsplit(publish.link(lab.notebook, hub, repo))
        assert unquote(url.query[len("next="):]) == f"{pull.path}?{pull.query}"
        assert line.endswith(lab.title)
