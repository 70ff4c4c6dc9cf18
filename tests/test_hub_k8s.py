"""The class server's Zero to JupyterHub values (``docker/hub/k8s/values.yaml``), checked as far as the course can
without helm or a cluster (docs/hub.md, "Kubernetes"): merged over the chart's 4.4.0 defaults as helm merges them,
they pass the chart's own values schema, which refuses a misspelt key; and they say what ``docker/hub`` says (the
image's paths, the hand-in receiver and its port, the limits, culling, the handouts' mount, the roster).
What was not run: ``helm template`` (helm cannot be installed here) and any cluster."""
from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml

from grader.author import publish

REPO = Path(__file__).resolve().parent.parent
K8S = REPO / "docker" / "hub" / "k8s"
CHART = K8S / "chart-4.4.0"
VALUES = yaml.safe_load((K8S / "values.yaml").read_text(encoding="utf-8"))
SCHEMA = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
HUB_CONFIG = (REPO / "docker" / "hub" / "jupyterhub_config.py").read_text(encoding="utf-8")


def coalesce(defaults, values):
    """``values`` over ``defaults`` as helm coalesces a chart's values: maps merge key by key, a null removes the
    default's key, anything else replaces it."""
    if not (isinstance(defaults, dict) and isinstance(values, dict)):
        return copy.deepcopy(values)
    merged = copy.deepcopy(defaults)
    for key, value in values.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = coalesce(defaults.get(key), value)
    return merged


def _validate(values) -> None:
    jsonschema.validate(coalesce(DEFAULTS, values), SCHEMA)


def test_the_values_merged_over_the_charts_defaults_pass_the_charts_schema():
    assert SCHEMA["properties"]["singleuser"]["additionalProperties"] is False   # the schema is strict there
    jsonschema.validate(DEFAULTS, SCHEMA)   # the chart's own defaults pass (its release checks the same)
    _validate(VALUES)


@pytest.mark.parametrize("path, value", [
    ("singleuser.memory.limt", "3G"),                 # a misspelt key
    ("singleuser.storage.type", "hostPath"),          # not one of dynamic, static, none
    ("cull.timeout", "an hour"),                      # not an integer
    ("hub.extraFiles.roster.contents", "x"),          # extraFiles take mountPath and (string)data only
    ("hub.networkPolicy.egressAllowRules.anywhere", True),
])
def test_the_schema_refuses_what_helm_would_refuse(path, value):
    broken = copy.deepcopy(VALUES)
    node = broken
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    with pytest.raises(jsonschema.ValidationError):
        _validate(broken)


def test_the_values_say_what_docker_hub_says():
    """The same single-user image and home, the same hand-in path (receiver, port, collection, environment), the
    same handouts' mount and limits as ``docker/hub/jupyterhub_config.py`` and ``hub.sh``."""
    single, hub = VALUES["singleuser"], VALUES["hub"]
    assert single["cmd"] == "jupyterhub-singleuser" and single["defaultUrl"] == "/lab"
    assert single["uid"] == single["fsGid"] == 1000 and single["allowPrivilegeEscalation"] is False
    assert single["storage"]["homeMountPath"] == "/home/student" and '"/home/student"' in HUB_CONFIG
    assert (single["memory"]["limit"], single["cpu"]["limit"]) == ("4G", 1)
    assert 'env("COURSE_HUB_MEM", "4G")' in HUB_CONFIG and 'env("COURSE_HUB_CPUS", "1")' in HUB_CONFIG
    assert VALUES["cull"] == {"enabled": True, "timeout": 3600, "every": 300}
    assert 'env("COURSE_HUB_CULL", "3600")' in HUB_CONFIG and '"--cull-every=300"' in HUB_CONFIG
    env = single["extraEnv"]
    assert env == {"SHELL": "/bin/bash", "COURSE_HANDIN_URL": "http://hub:8082/handin", "PYTHONPATH": "/home/student/handouts"}
    for name in env:
        assert f'"{name}":' in HUB_CONFIG   # docker/hub sets each for its containers too
    [mount] = single["storage"]["extraVolumeMounts"]
    assert f"file://{mount['mountPath']}" == publish.REPO_IN_CONTAINER and mount["readOnly"] is True
    assert single["storage"]["extraVolumes"][0]["persistentVolumeClaim"]["readOnly"] is True
    # the receiver: run by the hub, reachable on 8082 through the hub's Service, allowed by both network policies
    service = hub["services"]["handin"]
    command = service["command"]
    assert command[:2] == ["python3", hub["extraFiles"]["handin-service"]["mountPath"]]
    assert command[command.index("--listen") + 1] == "0.0.0.0:8082" and service["url"] == "http://hub:8082"
    collection = command[command.index("--collection") + 1]
    assert [m["mountPath"] for m in hub["extraVolumeMounts"]] == [collection]
    assert hub["service"]["extraPorts"] == [{"name": "handin", "port": 8082, "targetPort": 8082}]
    assert hub["networkPolicy"]["ingress"][0]["ports"] == [{"port": 8082}]
    assert single["networkPolicy"]["egress"][0]["ports"] == [{"port": 8082, "protocol": "TCP"}]
    assert single["networkPolicy"]["egressAllowRules"]["nonPrivateIPs"] is False
    assert "HANDIN_PORT = int(env(\"COURSE_HUB_HANDIN_PORT\", \"8082\"))" in HUB_CONFIG
    # the roster: read with docker/hub/roster.py from the file --set-file puts where extraConfig reads it
    snippet = hub["extraConfig"]["course-roster"]
    compile(snippet, "extraConfig", "exec")
    assert f'student_ids("{hub["extraFiles"]["roster"]["mountPath"]}")' in snippet
    assert hub["extraFiles"]["roster-py"]["mountPath"].endswith("/roster.py")
    for key, value in hub["config"]["NativeAuthenticator"].items():
        assert f"c.NativeAuthenticator.{key} = {value!r}" in HUB_CONFIG
    assert "c.Authenticator.allow_existing_users = False" in HUB_CONFIG


def test_the_install_command_sets_every_extra_file_and_the_storage_names_the_claims():
    header = (K8S / "values.yaml").read_text(encoding="utf-8").split("\nhub:")[0]
    install = " ".join(line.lstrip("# ").rstrip("\\ ") for line in header.splitlines() if "helm upgrade" in line
                       or "--set-file" in line or "--version" in line)
    words = shlex.split(install)
    assert words[words.index("--version") + 1] == "4.4.0" == CHART.name.split("-")[1]
    set_files = {w.split("=")[0] for w in words if w.startswith("hub.extraFiles.")}
    assert set_files == {f"hub.extraFiles.{key}.stringData" for key in VALUES["hub"]["extraFiles"]}
    for word in words:
        if word.startswith("hub.extraFiles.") and word.split("=")[1].startswith("docker/"):
            assert (REPO / word.split("=")[1]).is_file(), word
    claims = {doc["metadata"]["name"]: doc["spec"]["accessModes"]
              for doc in yaml.safe_load_all((K8S / "storage.yaml").read_text(encoding="utf-8"))}
    assert claims == {"course-collection": ["ReadWriteOnce"], "course-handouts": ["ReadOnlyMany", "ReadWriteOnce"]}
    used = {v["persistentVolumeClaim"]["claimName"] for v in VALUES["hub"]["extraVolumes"]
            + VALUES["singleuser"]["storage"]["extraVolumes"]}
    assert used == set(claims)
