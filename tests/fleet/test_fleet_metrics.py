"""A fleet is discoverable by Prometheus (file SD + a read-only token) and reports its stats.

One local Ray (one raylet, ~15 s to start) and a fleet of one node: kept short.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from collimate_rl.cli import main
from collimate_rl.ray import RayFleet
from tests.fleet._ray_files import remove_when_quiet

ray = pytest.importorskip("ray", reason="Ray is part of the `test` extra")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray_tmp = tempfile.mkdtemp(prefix="ray-")  # Ray's own files, removed after
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("RAY_TMPDIR", ray_tmp)
            ray.init(
                num_cpus=1, include_dashboard=False, logging_level="error", log_to_driver=False
            )
            try:
                yield
            finally:
                ray.shutdown()
    finally:
        remove_when_quiet(ray_tmp)


def test_the_fleet_writes_a_file_sd_list_and_reports_stats(
    local_ray: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sd = tmp_path / "prometheus" / "fleet.json"
    with RayFleet(isolation="none", pool_size=0, poll_interval=0.5, metrics_sd_file=sd) as fleet:
        (node,) = fleet.nodes()
        groups = json.loads(sd.read_text())
        host_port = node.address.removeprefix("http://")
        assert groups == [
            {
                "targets": [host_port],
                "labels": {
                    "collimate_node": node.tag,
                    "ray_node_id": node.ray_node_id,
                    "collimate_state": "healthy",
                },
            }
        ]
        token_file = sd.with_name("fleet.json.token")
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        scrape = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
        with httpx.Client(trust_env=False) as http:
            # what Prometheus does with that file: the token opens /metrics and nothing else
            assert http.get(f"http://{host_port}/metrics", headers=scrape).status_code == 200
            assert http.get(f"http://{host_port}/v1/health", headers=scrape).status_code == 401
            assert http.get(f"http://{host_port}/metrics").status_code == 401

        before = fleet.stats()
        with fleet.client() as client:
            for _ in range(3):
                assert client.exec_once("python3", command="true").exit_code == 0
        after = fleet.stats()
        assert [s.error for s in after.nodes] == [""]
        assert after.total("execs") - before.total("execs") == 3
        assert after.to_json()["nodes"][0]["tag"] == node.tag

        # collimate top reads the same file (and its token)
        assert main(["top", "--sd-file", str(sd), "--json", "--interval", "0.1"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown[node.tag]["execs"]["ok"] >= 3
    assert json.loads(sd.read_text()) == []  # a closed fleet has no targets
