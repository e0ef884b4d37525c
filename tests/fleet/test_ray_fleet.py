"""RayFleet on a simulated Ray cluster (``ray.cluster_utils.Cluster``: raylets on this machine).

One cluster and one fleet for the whole module (starting Ray takes ~15 s): the tests
run in file order and some change the cluster (a node joins, a node is removed), so
each says what it expects to find. Every simulated Ray node is a separate raylet with
its own fleet node: its own actor process, LocalNode process, TCP port and folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import httpx
import numpy as np
import pytest
from faults._proc import RunSnapshot, process_tree, processes_with

import collimate_envs  # noqa: F401  (registers the env ids)
from collimate_envs import info as keys
from collimate_rl.bench.cluster import ClusterPlan, measure_fleet
from collimate_rl.bench.cluster import sections_of as cluster_sections_from
from collimate_rl.errors import CollimateUsageError
from collimate_rl.node.runtime._recovery import RECORD_NAME
from collimate_rl.ray import FleetNode, NodeLostError, NodeState, NoHealthyNodeError, RayFleet
from collimate_rl.ray._host import host_root
from tests.fleet._ray_files import remove_when_quiet

ray = pytest.importorskip("ray", reason="Ray is part of the `test` extra")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.slow


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # Ray's own files (session logs, sockets; /tmp/ray by default) go to a folder of this
    # module's, removed after: its raylets and drivers all read RAY_TMPDIR.
    ray_tmp = tempfile.mkdtemp(prefix="ray-")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("RAY_TMPDIR", ray_tmp)
            cluster = Cluster(
                initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
            )
            try:
                cluster.add_node(num_cpus=1)
                ray.init(address=cluster.address, logging_level="error", log_to_driver=False)
                yield cluster
            finally:
                ray.shutdown()
                cluster.shutdown()
    finally:
        remove_when_quiet(ray_tmp)


@pytest.fixture(scope="module")
def fleet(cluster: Cluster) -> Iterator[RayFleet]:
    with RayFleet(poll_interval=0.5) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def snapshots() -> dict[str, RunSnapshot]:
    """What each node run owned (processes, memory cgroups), kept for the final leak check."""
    return {}


def _snapshot(node: FleetNode) -> RunSnapshot:
    state = _workdir(node) / "state"
    record = json.loads((state / RECORD_NAME).read_text())
    snap = RunSnapshot(process_tree(node.pid), [], record["memcg_parent"], record["memcg_tag"])
    snap.cgroups = snap.cgroups_now()
    return snap


def _folder(node: FleetNode) -> Path:
    return host_root() / f"h{node.tag}"


def _workdir(node: FleetNode) -> Path:
    (workdir,) = _folder(node).glob("collimate-node-*")
    return workdir


def _mounts_under(path: Path) -> list[str]:
    return [
        line for line in Path("/proc/self/mounts").read_text().splitlines() if str(path) in line
    ]


def _alive_ray_nodes() -> dict[str, dict[str, Any]]:
    return {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}


def _live(fleet: RayFleet) -> list[FleetNode]:
    return [n for n in fleet.nodes() if n.state is NodeState.HEALTHY]


# -- bad input first: no Ray, no node -------------------------------------------------------


def test_a_fleet_without_ray_or_without_a_healthy_node_is_a_clear_error(
    cluster: Cluster,
) -> None:
    with pytest.raises(NoHealthyNodeError, match="no alive Ray node with the resource 'sandbox'"):
        RayFleet(resource="sandbox").start()
    with pytest.raises(CollimateUsageError, match="unknown node option"):
        RayFleet(max_inflght=4)
    before = set(host_root().glob("hn*"))
    with pytest.raises(NoHealthyNodeError) as none:
        RayFleet(extra_args=("--no-such-flag",), startup_timeout=60).start()
    message = str(none.value)
    assert message.count(": failed (") == len(_alive_ray_nodes()), message
    assert "the node exited" in message  # each node's own reason
    assert set(host_root().glob("hn*")) == before  # the failed hosts removed their folders


# -- one node per Ray node --------------------------------------------------------------------


def test_every_ray_node_gets_its_own_pinned_node(
    fleet: RayFleet, snapshots: dict[str, RunSnapshot]
) -> None:
    nodes = fleet.nodes()
    alive = _alive_ray_nodes()
    assert sorted(n.ray_node_id for n in nodes) == sorted(alive)
    for node in nodes:
        assert node.state is NodeState.HEALTHY and node.load.max_inflight > 0
        assert node.address.startswith(f"http://{alive[node.ray_node_id]['NodeManagerAddress']}:")
        assert "python3" in node.templates
        assert node.auth is True  # its own bearer token: others on the network are refused
        refused = httpx.get(node.address + "/v1/sessions", timeout=10)
        assert refused.status_code == 401, refused.text
        snapshots[node.tag] = _snapshot(node)
    assert len({n.address for n in nodes}) == len({n.pid for n in nodes}) == len(nodes)
    assert len({_workdir(n) for n in nodes}) == len(nodes)
    assert fleet.capacity() == sum(n.load.max_inflight for n in nodes)


def test_sessions_spread_and_forks_stay_on_their_parents_node(fleet: RayFleet) -> None:
    client = fleet.client()
    sessions = [str(client.create_session("python3")["session_id"]) for _ in range(4)]
    try:
        assert sorted(Counter(fleet.node_of(s).tag for s in sessions).values()) == [2, 2]
        client.session_exec(sessions[0], command="echo parent > /sandbox/note")
        forked = client.fork_session(sessions[0], 3)
        sessions += forked.session_ids
        for child in forked.session_ids:
            assert fleet.node_of(child) == fleet.node_of(sessions[0])
            assert client.session_exec(child, command="cat /sandbox/note").stdout == "parent\n"
    finally:
        for sid in sessions:
            assert client.delete_session(sid).deleted
    assert client.list_sessions() == []


def test_a_vector_env_over_the_fleet_grades_correctly(fleet: RayFleet) -> None:
    client = fleet.client()
    envs = gym.make_vec("collimate/Code-v0", num_envs=4, group_size=2, client=client)
    try:
        envs.reset(seed=0)
        env = envs.unwrapped
        groups = [sessions.members for sessions in env._groups]
        assert len({fleet.node_of(m).tag for m in groups[0]}) == 1
        assert {fleet.node_of(g[0]).tag for g in groups} == {n.tag for n in _live(fleet)}
        tasks = env._group_tasks
        right = [_fenced(tasks[i // 2].reference_solution) for i in range(4)]
        _, rewards, _, _, infos = envs.step(right)
        assert list(rewards) == [1.0] * 4 and not infos[keys.INFRA_ERROR].any()
        envs.step(["x"] * 4)  # next-step autoreset
        _, rewards, _, _, infos = envs.step([_fenced("def nothing(): pass")] * 4)
        assert list(rewards) == [0.0] * 4 and not infos[keys.INFRA_ERROR].any()
    finally:
        envs.close()
    assert client.list_sessions() == []


def test_the_bench_measures_routing_on_the_fleet(fleet: RayFleet) -> None:
    plan = ClusterPlan(sizes=(2,), samples=5, seconds=0.3)
    sample = measure_fleet(fleet, plan, progress=lambda _: None)
    assert sample.nodes == len(_live(fleet)) == 2
    assert sample.direct.p50 > 0 and sample.routed.p50 > 0 and sample.ray_actor.p50 > 0
    assert 0 < sample.routing_us < 1000 and sample.routed_cpu_ms > 0
    assert set(sample.spread) == {n.tag for n in _live(fleet)}  # exec_once spread over both
    rows = cluster_sections_from([sample])
    assert rows[0].data[0]["nodes"] == 2 and rows[1].data[0]["limit"] in ("nodes", "driver")
    assert fleet.client().list_sessions() == []


# -- nodes come and go ------------------------------------------------------------------------


def test_a_node_added_to_the_cluster_joins_and_takes_sessions(
    cluster: Cluster, fleet: RayFleet, snapshots: dict[str, RunSnapshot]
) -> None:
    client = fleet.client()
    baked = client.bake_template("fleet-baked", ["echo from-the-bake > /sandbox/marker.txt"])
    assert baked["nodes"] == sorted(n.tag for n in _live(fleet))
    kept = [str(client.create_session("python3")["session_id"]) for _ in range(4)]  # 2 a node
    added = cluster.add_node(num_cpus=1)
    joined = fleet.wait_for(3, timeout=120)  # the monitor notices by itself
    (new,) = [n for n in joined if n.ray_node_id == added.node_id]
    snapshots[new.tag] = _snapshot(new)
    fresh = [str(client.create_session("python3")["session_id"]) for _ in range(3)]
    try:
        # The empty node takes new sessions until it has as many as the others.
        assert [fleet.node_of(s).tag for s in fresh].count(new.tag) >= 2
        assert new.tag in client.spread_targets()
        # It baked what the fleet baked before it joined.
        assert "fleet-baked" in client.templates()
        on_new = str(client.create_session("fleet-baked", node=new.tag)["session_id"])
        fresh.append(on_new)
        assert client.session_exec(on_new, command="cat marker.txt").stdout == "from-the-bake\n"
    finally:
        for sid in kept + fresh:
            client.delete_session(sid)


def test_removing_a_node_mid_step_flags_its_members_and_the_next_reset_works(
    cluster: Cluster, fleet: RayFleet
) -> None:
    client = fleet.client()
    envs = gym.make_vec(
        "collimate/Code-v0",
        num_envs=6,
        group_size=2,
        client=client,
        concurrency=6,
        timeout_seconds=30,
    )
    try:
        envs.reset(seed=1)
        env = envs.unwrapped
        head = cluster.head_node.node_id
        on_node = [fleet.node_of(sessions.members[0]) for sessions in env._groups]
        victim = next(n for n in on_node if n.ray_node_id != head)
        lost_group = on_node.index(victim)
        # The harness loads the candidate once per test call: sleep on the first load only,
        # and less than a test call may take (6 s by default).
        slow = (
            "import os, time\n"
            "if not os.path.exists('/tmp/.slept'):\n"
            "    open('/tmp/.slept', 'w').close()\n"
            "    time.sleep(4.5)\n"
        )
        actions = [_fenced(slow + env._group_tasks[i // 2].reference_solution) for i in range(6)]

        result: dict[str, Any] = {}
        stepping = threading.Thread(target=lambda: result.update(out=envs.step(actions)))
        stepping.start()
        time.sleep(1.0)  # every member's exec is running
        (raylet,) = [n for n in cluster.worker_nodes if n.node_id == victim.ray_node_id]
        cluster.remove_node(raylet)
        fleet.refresh()
        stepping.join(timeout=120)
        _, rewards, _, _, infos = result["out"]

        lost = np.zeros(6, dtype=bool)
        lost[2 * lost_group : 2 * lost_group + 2] = True
        assert list(infos[keys.INFRA_ERROR]) == list(lost)
        assert (rewards[lost] == 0.0).all() and (rewards[~lost] == 1.0).all(), infos
        assert np.isnan(infos[keys.ADVANTAGE][lost]).all()
        gone = fleet.node_of(env._groups[lost_group].members[0])
        assert gone.state is NodeState.LOST
        reasons = ("its Ray node died", "its node is shutting down", "did not answer")
        assert any(reason in gone.error for reason in reasons), gone.error
        with pytest.raises(NodeLostError):
            client.session_exec(env._groups[lost_group].members[0], code="pass")

        envs.step(["x"] * 6)  # next-step autoreset: every group re-forked
        for sessions in env._groups:
            assert {fleet.node_of(m).state for m in sessions.members} == {NodeState.HEALTHY}
        right = [_fenced(env._group_tasks[i // 2].reference_solution) for i in range(6)]
        _, rewards, _, _, infos = envs.step(right)
        assert list(rewards) == [1.0] * 6 and not infos[keys.INFRA_ERROR].any()
    finally:
        envs.close()


_DRIVER = """
import json, sys, time
import ray
from collimate_rl.ray import RayFleet
ray.init(address=sys.argv[1], logging_level="error", log_to_driver=False)
fleet = RayFleet(poll_interval=0.5).start()
client = fleet.client()
for _ in fleet.nodes():
    client.create_session("python3")
print(json.dumps([[n.tag, n.pid] for n in fleet.nodes()]), flush=True)
time.sleep(600)
"""


def test_the_drivers_death_stops_its_nodes(cluster: Cluster, fleet: RayFleet) -> None:
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, cluster.address],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert driver.stdout is not None
        line = driver.stdout.readline()
        nodes = [FleetNode(tag, "", pid=pid) for tag, pid in json.loads(line)]
        assert len(nodes) == len(_alive_ray_nodes())
        snaps = [_snapshot(n) for n in nodes]
        assert os.geteuid() != 0 or all(snap.cgroups for snap in snaps)  # memory cgroups (root)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    for snap in snaps:
        snap.assert_gone(timeout=60)  # processes and memory cgroups: the janitors' work
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(
        _folder(n).exists() or processes_with(str(_folder(n))) for n in nodes
    ):
        time.sleep(0.2)
    for node in nodes:
        assert not _folder(node).exists(), node  # state dir, sockets, log: all removed
        assert _mounts_under(_folder(node)) == []
        assert processes_with(str(_folder(node))) == []  # the janitor is done too
    assert all(_folder(n).exists() for n in fleet.nodes() if n.state is NodeState.HEALTHY)


def test_close_leaves_no_process_session_folder_or_mount(
    fleet: RayFleet, snapshots: dict[str, RunSnapshot]
) -> None:
    client = fleet.client()
    sid = str(client.create_session("python3")["session_id"])  # left open on purpose
    nodes = fleet.nodes()
    assert len(snapshots) == len(nodes)
    fleet.close()
    fleet.close()  # idempotent
    assert {n.state for n in fleet.nodes()} <= {NodeState.STOPPED, NodeState.LOST}
    for snap in snapshots.values():
        snap.assert_gone(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(
        _folder(n).exists() or processes_with(str(_folder(n))) for n in nodes
    ):
        time.sleep(0.2)
    for node in nodes:
        assert not _folder(node).exists(), node
        assert _mounts_under(_folder(node)) == []
        assert processes_with(str(_folder(node))) == []
    with pytest.raises(CollimateUsageError, match="closed"):
        client.session_exec(sid, code="pass")
    with pytest.raises(CollimateUsageError, match="closed"):
        fleet.start()
    assert os.path.isdir(host_root())
