"""``docker/host_pip.py``: the host's pip settings become the images' build arguments, and the local folders
they name are served on loopback (no Docker needed)."""
from __future__ import annotations

import importlib.util
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("host_pip", REPO / "docker" / "host_pip.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


host_pip = _load()


@pytest.fixture()
def no_extra_cas(tmp_path, monkeypatch):
    monkeypatch.setattr(host_pip, "EXTRA_CAS", tmp_path / "no-cas")


def test_files_then_environment_later_ones_win_install_section_over_global(tmp_path):
    system, user = tmp_path / "pip.conf", tmp_path / "user.conf"
    system.write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\ntimeout = 60\n"
                      "find-links = /srv/a\n  /srv/b\n")
    user.write_text("[global]\nindex-url = https://mirror.example/simple\n[install]\nindex_url = https://inst.example/simple\n"
                    "[freeze]\nall = true\n")
    found = host_pip.settings({"PIP_DEFAULT_TIMEOUT": "180", "PATH": "/bin"}, [system, user])
    assert found == {"cert": "/etc/ssl/certs/ca-certificates.crt", "default-timeout": "180",
                     "find-links": "/srv/a /srv/b", "index-url": "https://inst.example/simple"}


def test_local_folders_become_loopback_urls_and_the_rest_stays(tmp_path, no_extra_cas):
    wheels, mirror = tmp_path / "wheels", tmp_path / "mirror"
    wheels.mkdir()
    (mirror / "simple").mkdir(parents=True)
    found = {"find-links": f"{wheels} {tmp_path / 'gone'} https://example.org/wheels/",
             "extra-index-url": f"file://{mirror}/simple https://pypi.example/simple",
             "cert": "/root/corp.pem", "default-timeout": "180", "disable-pip-version-check": "1", "retries": "9"}
    args, folders, notes = host_pip.build_args(4242, found)
    assert args == {
        "PIP_FIND_LINKS": f"http://127.0.0.1:4242{wheels}/ https://example.org/wheels/",
        "PIP_EXTRA_INDEX_URL": f"http://127.0.0.1:4242{mirror}/simple/ https://pypi.example/simple",
        "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",   # the image's bundle, which holds the host's CAs
        "PIP_DEFAULT_TIMEOUT": "180"}
    assert folders == [wheels, mirror]   # the index's parent: its pages link to ../../files/
    assert notes == [f"find-links {tmp_path / 'gone'}: no such folder here, left out",
                     "pip setting 'retries' not carried into the build"]


def test_extra_cas_on_the_host_set_the_images_bundle_even_without_a_cert_setting(tmp_path, monkeypatch):
    cas = tmp_path / "ca-certificates"
    (cas / "corp").mkdir(parents=True)
    monkeypatch.setattr(host_pip, "EXTRA_CAS", cas)
    assert host_pip.build_args(1, {})[0] == {}
    (cas / "corp" / "proxy.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    assert host_pip.build_args(1, {})[0] == {"PIP_CERT": "/etc/ssl/certs/ca-certificates.crt"}


def test_a_url_with_credentials_is_refused_since_build_arguments_show_in_the_history(no_extra_cas, monkeypatch,
                                                                                     capsys):
    monkeypatch.setattr(host_pip, "settings", lambda: {"extra-index-url": "https://ci:s3cret@pypi.example/simple"})
    assert host_pip.main(["args"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "s3cret" not in err
    assert "extra-index-url holds credentials (https://ci:***@pypi.example...)" in err


def test_the_server_answers_inside_its_folders_only(tmp_path):
    served, other = tmp_path / "mirror", tmp_path / "private"
    (served / "files").mkdir(parents=True)
    other.mkdir()
    (served / "files" / "tabulate-0.10.0-py3-none-any.whl").write_bytes(b"wheel bytes")
    (other / "secret.txt").write_text("no")
    handler = host_pip.functools.partial(host_pip.FolderHandler, roots=(served.resolve(),))
    server = host_pip.http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(f"{base}{served}/files/tabulate-0.10.0-py3-none-any.whl", timeout=10) as resp:
            assert resp.read() == b"wheel bytes"
        with urllib.request.urlopen(f"{base}{served}/files/", timeout=10) as resp:   # find-links reads the listing
            assert 'href="tabulate-0.10.0-py3-none-any.whl"' in resp.read().decode()
        for outside in (f"{other}/secret.txt", f"{served}/../private/secret.txt", "/etc/passwd"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(base + outside, timeout=10)
            assert err.value.code == 404, outside
    finally:
        server.shutdown()
        server.server_close()
