"""The KubeRay manifest in docs/scale-out.md: it parses, and says what the fleet needs.

Not applied anywhere (no Kubernetes here): these checks stand in for ``kubectl apply
--dry-run=server`` against the RayCluster CRD, on the fields the docs rely on.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.ray._host import NODE_OPTIONS

yaml = pytest.importorskip("yaml")

DOC = Path(__file__).resolve().parents[2] / "docs" / "scale-out.md"


def _manifests() -> dict[str, dict[str, Any]]:
    text = DOC.read_text()
    section = text.split("## Kubernetes with KubeRay", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    docs = [d for d in yaml.safe_load_all(block) if d is not None]
    return {d["kind"]: d for d in docs}


def _strings_only(mapping: dict[str, Any], where: str) -> None:
    # KubeRay's rayStartParams is map[string]string: a bare number fails admission.
    for key, value in mapping.items():
        assert isinstance(value, str), f"{where}.{key} must be a string, got {value!r}"


def test_the_ray_cluster_is_well_formed() -> None:
    cluster = _manifests()["RayCluster"]
    assert cluster["apiVersion"] == "ray.io/v1"
    spec = cluster["spec"]
    version = spec["rayVersion"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert spec["autoscalerOptions"]["idleTimeoutSeconds"] > 0
    groups = [("head", spec["headGroupSpec"])]
    groups += [(g["groupName"], g) for g in spec["workerGroupSpecs"]]
    for name, group in groups:
        _strings_only(group["rayStartParams"], f"{name}.rayStartParams")
        (container,) = group["template"]["spec"]["containers"]
        assert container["image"].endswith(f"ray{version}"), "the image must carry rayVersion"
        resources = container["resources"]
        assert resources["requests"] == resources["limits"], "Ray sizes itself from the limits"
        names = [p["name"] for p in container.get("ports", [])]
        assert len(names) == len(set(names)) and all(len(n) <= 15 for n in names)
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"  # no sandboxes on the head


def test_the_sandbox_group_is_what_the_fleet_expects() -> None:
    spec = _manifests()["RayCluster"]["spec"]
    (group,) = [g for g in spec["workerGroupSpecs"] if g["groupName"] == "sandboxes"]
    assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    # KubeRay pastes the value into the `ray start --resources=...` shell command as is:
    # the shell drops the outer quotes and the backslashes, Ray reads the JSON.
    quoted = group["rayStartParams"]["resources"]
    assert quoted.startswith('"') and quoted.endswith('"')
    assert json.loads(quoted[1:-1].replace('\\"', '"')) == {"collimate": 1}
    (container,) = group["template"]["spec"]["containers"]
    assert {"containerPort": 8790, "name": "collimate"} in container["ports"]
    security = container["securityContext"]
    # Nested user namespaces for bubblewrap, and nothing more.
    assert security["seccompProfile"] == {"type": "Unconfined"}
    assert security["appArmorProfile"] == {"type": "Unconfined"}
    assert security["runAsNonRoot"] is True and security["allowPrivilegeEscalation"] is False
    assert "privileged" not in security and "capabilities" not in security
    env = {e["name"]: e["value"] for e in container["env"]}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert env["TMPDIR"] in mounts  # the nodes' folders live on the pod's scratch volume
    text = DOC.read_text()
    assert 'RayFleet(port=8790, resource="collimate")' in text


def test_only_the_clusters_own_pods_reach_it() -> None:
    manifests = _manifests()
    cluster_name = manifests["RayCluster"]["metadata"]["name"]
    policy = manifests["NetworkPolicy"]
    assert policy["apiVersion"] == "networking.k8s.io/v1"
    selector = {"ray.io/cluster": cluster_name}  # the label KubeRay puts on every pod
    assert policy["spec"]["podSelector"]["matchLabels"] == selector
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": selector}}]


def test_the_documented_fleet_options_exist() -> None:
    text = DOC.read_text()
    listed = re.search(r"and the `LocalNode` settings (.*?)\.\n", text, flags=re.DOTALL)
    assert listed is not None
    names = set(re.findall(r"`(\w+)`", listed.group(1)))
    assert names == NODE_OPTIONS - {"isolation", "startup_timeout"}
