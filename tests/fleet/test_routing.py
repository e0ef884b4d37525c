"""The fleet client's routing, without Ray: real nodes behind a fixed directory.

Two real LocalNodes (TCP, default isolation) stand for two machines; the Ray side
(membership, loss, close) is tested on a simulated Ray cluster in test_fleet.py.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import time
from collections import Counter
from collections.abc import Iterator

import anyio
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collimate_envs import info as keys
from collimate_envs._groups import spread_targets
from collimate_envs.vector import GroupVectorEnv
from collimate_rl import Sandbox, grade_batch
from collimate_rl.errors import CollimateError, CollimateNotFoundError, CollimateUsageError
from collimate_rl.grading import UnitTestReward
from collimate_rl.node import LocalNode
from collimate_rl.ray import (
    AsyncFleetClient,
    FleetClient,
    FleetNode,
    NodeLoad,
    NodeLostError,
    NodeState,
    NoHealthyNodeError,
)
from collimate_rl.ray._directory import Directory
from collimate_rl.ray._ids import fleet_id, is_tag, new_tag, split_id
from collimate_rl.ray._router import Router, fleet_forked, fleet_health
from collimate_rl.wire import CollimateClient
from collimate_rl.wire.models import ForkResponse, Health


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


# -- ids ------------------------------------------------------------------------------------


@given(st.text(min_size=1).filter(lambda s: "\x00" not in s))
def test_fleet_ids_round_trip(node_session_id: str) -> None:
    tag = new_tag()
    assert split_id(fleet_id(tag, node_session_id)) == (tag, node_session_id)


@given(st.text())
def test_anything_without_a_node_tag_is_refused(text: str) -> None:
    tag, sep, rest = text.partition(".")
    if sep and rest and is_tag(tag):
        return  # a well-formed fleet id
    with pytest.raises(CollimateUsageError):
        split_id(text)


# -- placement ------------------------------------------------------------------------------


def _node(i: int, state: NodeState = NodeState.HEALTHY, **load: int) -> FleetNode:
    return FleetNode(f"n{i:08x}", f"ray-{i}", f"http://10.0.0.{i}:1", state, NodeLoad(**load))


@given(st.integers(1, 5), st.integers(1, 6))
def test_a_burst_of_creates_spreads_evenly(nodes: int, per_node: int) -> None:
    router = Router(Directory.fixed([_node(i, max_inflight=8) for i in range(nodes)]))
    placed: Counter[str] = Counter()
    for _ in range(nodes * per_node):
        node = router.choose("session")
        router.started(node, "session")
        router.finished(node)
        placed[node.tag] += 1
    assert sorted(placed.values()) == [per_node] * nodes


def test_placement_prefers_the_least_loaded_and_skips_unhealthy_nodes() -> None:
    d = Directory.fixed(
        [
            _node(1, sessions=4, max_inflight=4),  # 1.0 per slot
            _node(2, sessions=6, max_inflight=12),  # 0.5 per slot: least loaded
            _node(3, NodeState.DRAINING),
            _node(4, NodeState.LOST),
        ]
    )
    router = Router(d)
    assert router.choose("session").tag == "n00000002"
    assert router.choose("session", exclude={"n00000002"}).tag == "n00000001"
    assert router.spread_targets() == ("n00000001", "n00000002")
    # One-shot execs go by execs per slot, counting this client's own in flight.
    busy = d.get("n00000002")
    assert busy is not None
    for _ in range(12):
        router.started(busy, None)
    assert router.choose("exec").tag == "n00000001"
    with pytest.raises(NoHealthyNodeError, match=r"n00000004: lost"):
        router.choose("exec", exclude={"n00000001", "n00000002"})


def test_session_calls_go_to_their_node_or_fail_typed() -> None:
    d = Directory.fixed([_node(1), _node(2), _node(3, NodeState.DRAINING)])
    d.update("n00000002", state=NodeState.LOST, error="its Ray node died")
    d.update("n00000002", error="a later error never hides the first")
    router = Router(d)
    assert router.locate("n00000003.ses_x")[0].tag == "n00000003"  # draining still serves
    with pytest.raises(NodeLostError, match="its Ray node died") as lost:
        router.locate("n00000002.ses_x")
    assert lost.value.sent is False and lost.value.node == "n00000002"
    with pytest.raises(CollimateNotFoundError) as unknown:
        router.locate("n0000000f.ses_x")
    assert unknown.value.error_code == "no_such_session"
    with pytest.raises(CollimateUsageError, match="not made by a fleet client"):
        router.locate("ses_x")
    with pytest.raises(NoHealthyNodeError, match="draining"):
        router.pinned("n00000003")
    d.closed = True
    with pytest.raises(CollimateUsageError, match="closed"):
        router.locate("n00000001.ses_x")


def test_node_answers_carry_fleet_ids() -> None:
    forked = fleet_forked("n00000001", ForkResponse.build("ses_p", [{"id": "ses_a"}]))
    assert forked.parent == "n00000001.ses_p"
    assert (
        forked.session_ids == ["n00000001.ses_a"]
        and forked["children"][0]["id"] == forked.session_ids[0]
    )
    health = fleet_health(
        {
            "n00000001": Health.from_raw(
                {"sessions": 2, "max_inflight": 4, "templates": ["a", "b"]}
            ),
            "n00000002": Health.from_raw({"sessions": 1, "max_inflight": 4, "templates": ["b"]}),
        },
        [_node(1), _node(2, NodeState.LOST)],
    )
    assert (health.status, health.sessions, health.max_inflight, health.templates) == (
        "ok",
        3,
        8,
        ("b",),
    )


def test_the_clients_are_twins_of_each_other_and_of_the_daemon_client() -> None:
    def surface(cls: type) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(member)
            for name, member in inspect.getmembers(cls, callable)
            if not name.startswith("_") and name not in ("close", "aclose")
        }

    sync, aio = surface(FleetClient), surface(AsyncFleetClient)
    assert sync == aio
    for name, signature in surface(CollimateClient).items():
        if name in ("from_env", "for_node_socket"):
            continue  # constructors of a client of one daemon
        assert name in sync, name
        ours = sync[name].parameters
        for param in signature.parameters.values():
            assert param.name in ours, (name, param.name)
            assert ours[param.name].default == param.default, (name, param.name)


# -- two real nodes ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[LocalNode]]:
    # one image store for both, as a machine's nodes share theirs (never the user's own)
    store = tmp_path_factory.mktemp("fleet-store") / "images"
    with (
        LocalNode(tcp=True, image_store=store) as first,
        LocalNode(tcp=True, image_store=store) as second,
    ):
        yield [first, second]


@pytest.fixture
def directory(two_nodes: list[LocalNode]) -> Directory:
    nodes = []
    for i, node in enumerate(two_nodes, start=1):
        health = node.client().health()
        load = NodeLoad.from_health(health, stamp=1)
        nodes.append(FleetNode(f"n{i:08x}", f"ray-{i}", node.base_url, NodeState.HEALTHY, load))
    directory = Directory.fixed(nodes)
    for i, node in enumerate(two_nodes, start=1):
        directory.set_token(f"n{i:08x}", node.token)  # a node over TCP wants its own token
    return directory


@pytest.fixture
def fleet_client(directory: Directory, two_nodes: list[LocalNode]) -> Iterator[FleetClient]:
    client = FleetClient(directory)
    yield client
    client.close()
    for node in two_nodes:  # every test cleans up after itself
        assert node.client().list_sessions() == []


def test_sessions_spread_and_forks_stay_with_their_parent(fleet_client: FleetClient) -> None:
    with Sandbox("python3", client=fleet_client) as a, Sandbox("python3", client=fleet_client) as b:
        assert fleet_client.node_of(a.session_id).tag != fleet_client.node_of(b.session_id).tag
        a.upload_bytes("/sandbox/data.bin", b"\x00\xffshared")
        children = a.fork(3)
        try:
            for child in children:
                assert fleet_client.node_of(child.session_id) == fleet_client.node_of(a.session_id)
                assert child.download("/sandbox/data.bin") == b"\x00\xffshared"
            rows = {info.session_id for info in fleet_client.list_sessions()}
            assert {a.session_id, b.session_id, *(c.session_id for c in children)} <= rows
            assert (
                fleet_client.get_session(children[0].session_id).session_id
                == children[0].session_id
            )
        finally:
            for child in children:
                child.close()


def test_grade_batch_spreads_and_a_lost_node_is_an_infra_error(
    fleet_client: FleetClient, directory: Directory
) -> None:
    spec = UnitTestReward("assert add(1, 2) == 3", entry="add")
    right, wrong = (
        _fenced("def add(a, b):\n    return a + b"),
        _fenced("def add(a, b):\n    return a - b"),
    )
    results = grade_batch(fleet_client, "python3", [right, wrong] * 4, spec, concurrency=4)
    assert [r.reward for r in results] == [1.0, 0.0] * 4
    assert set(fleet_client.calls_by_node()) == {"n00000001", "n00000002"}

    directory.update("n00000002", state=NodeState.LOST, error="its Ray node died")
    results = grade_batch(
        fleet_client, "python3", [right] * 4, spec, concurrency=4, on_infra_error="zero"
    )
    assert [r.reward for r in results] == [1.0] * 4  # new work goes to the live node
    directory.update("n00000001", state=NodeState.LOST, error="its Ray node died")
    results = grade_batch(fleet_client, "python3", [right] * 2, spec, on_infra_error="zero")
    assert all(r.infra_error and r.reward == 0.0 for r in results)
    assert "no healthy node" in str(results[0].error)


def test_a_call_in_flight_when_its_node_is_lost_fails(
    fleet_client: FleetClient, directory: Directory
) -> None:
    sid = str(fleet_client.create_session("python3", node="n00000001")["session_id"])
    timer = threading.Timer(0.5, directory.update, ("n00000001",), {"state": NodeState.LOST})
    timer.start()
    with pytest.raises(NodeLostError) as lost:
        fleet_client.session_exec(sid, code="import time; time.sleep(2); print('done')")
    timer.join()
    assert lost.value.sent is True  # it ran; its result is not handed out
    assert fleet_client.delete_session(sid).deleted is False  # never raises
    with pytest.raises(NodeLostError):
        fleet_client.session_exec(sid, code="print(1)")
    # The node itself is fine (the directory only says otherwise): clean up there.
    node_sid = split_id(sid)[1]
    healthy = dataclasses.replace(fleet_client.node_of(sid), state=NodeState.HEALTHY)
    other = FleetClient(Directory.fixed([healthy]))
    other.directory.set_token("n00000001", directory.token_of("n00000001"))
    assert other.delete_session(fleet_id("n00000001", node_sid)).deleted
    other.close()


def test_the_vector_env_spreads_groups_and_grades_them(fleet_client: FleetClient) -> None:
    assert spread_targets(fleet_client) == ("n00000001", "n00000002")
    envs = GroupVectorEnv(num_envs=6, group_size=2, client=fleet_client, concurrency=6)
    try:
        envs.reset(seed=0)
        nodes_of_groups = []
        for sessions in envs._groups:
            assert sessions is not None
            tags = {fleet_client.node_of(m).tag for m in sessions.members}
            assert len(tags) == 1  # a group never spans nodes
            nodes_of_groups.append(tags.pop())
        assert nodes_of_groups == ["n00000001", "n00000002", "n00000001"]
        actions = [_fenced(envs._group_tasks[i // 2].reference_solution) for i in range(6)]
        _, rewards, _, _, infos = envs.step(actions)
        assert list(rewards) == [1.0] * 6 and not infos[keys.INFRA_ERROR].any()
    finally:
        envs.close()


def test_the_async_client_routes_the_same_way(directory: Directory) -> None:
    async def main() -> None:
        async with AsyncFleetClient(directory) as client:
            first = (await client.create_session("python3"))["session_id"]
            second = (await client.create_session("python3"))["session_id"]
            assert client.node_of(first).tag != client.node_of(second).tag
            forked = await client.fork_session(first, 2)
            assert {client.node_of(c).tag for c in forked.session_ids} == {
                client.node_of(first).tag
            }
            out = await client.session_exec(forked.session_ids[0], code="print(6 * 7)")
            assert out.stdout == "42\n"
            assert (await client.exec_once("python3", code="print(1)")).stdout == "1\n"
            for sid in (first, second, *forked.session_ids):
                assert (await client.delete_session(sid)).deleted

    anyio.run(main)


def test_health_and_templates_sum_over_the_nodes(fleet_client: FleetClient) -> None:
    health = fleet_client.health()
    assert health.status == "ok" and "python3" in fleet_client.templates()
    assert health.max_inflight == fleet_client.capacity() > 0
    assert [n["tag"] for n in health["nodes"]] == ["n00000001", "n00000002"]
    assert np.isfinite(health.sessions)


def test_a_slow_node_does_not_hold_placement(fleet_client: FleetClient) -> None:
    # Execs in flight on one node send the next one-shot execs to the other.
    sid = str(fleet_client.create_session("python3", node="n00000001")["session_id"])
    try:
        worker = threading.Thread(
            target=fleet_client.session_exec,
            args=(sid,),
            kwargs={"code": "import time; time.sleep(1)"},
        )
        worker.start()
        time.sleep(0.2)
        before = Counter(fleet_client.calls_by_node())
        for _ in range(3):
            fleet_client.exec_once("python3", code="pass")
        worker.join()
        sent = Counter(fleet_client.calls_by_node()) - before
        assert sent["n00000002"] >= 2
    finally:
        fleet_client.delete_session(sid)


def test_unknown_and_foreign_ids_are_clear_errors(fleet_client: FleetClient) -> None:
    with pytest.raises(CollimateUsageError, match="not made by a fleet client"):
        fleet_client.session_exec("ses_123", code="pass")
    with pytest.raises(CollimateNotFoundError, match="not part of this fleet"):
        fleet_client.node_of("n0000abcd.ses_123")
    with pytest.raises(CollimateUsageError, match="not part of this fleet"):
        fleet_client.create_session("python3", node="n0000abcd")


def test_the_vector_env_grades_as_many_at_once_as_the_fleet_runs() -> None:
    class Wide:
        def capacity(self) -> int:
            return 40

    assert GroupVectorEnv(num_envs=64, group_size=2, client=Wide()).concurrency == 40
    assert GroupVectorEnv(num_envs=64, group_size=2, client=object()).concurrency == 16
    assert GroupVectorEnv(num_envs=8, group_size=2, client=Wide()).concurrency == 8
    assert GroupVectorEnv(num_envs=64, group_size=2, client=Wide(), concurrency=3).concurrency == 3


def test_a_batch_goes_to_each_sessions_node_and_a_lost_node_fails_its_items(
    fleet_client: FleetClient, directory: Directory, two_nodes: list[LocalNode]
) -> None:
    sids = [
        str(fleet_client.create_session("python3", node=tag)["session_id"])
        for tag in ("n00000001", "n00000002")
    ]
    items = [{"session_id": sid, "code": f"print({i})"} for i, sid in enumerate(sids)]
    items.append({"template_id": "python3", "code": "print('one-shot')"})
    results = fleet_client.exec_batch(items)
    assert [r.stdout for r in results if not isinstance(r, CollimateError)] == [
        "0\n",
        "1\n",
        "one-shot\n",
    ]
    directory.update("n00000002", state=NodeState.LOST, error="its Ray node died")
    first, second = fleet_client.exec_batch(items[:2])
    assert not isinstance(first, CollimateError) and first.stdout == "0\n"
    assert isinstance(second, NodeLostError)  # an item's error, never a result
    assert fleet_client.delete_sessions(sids) == sids[:1]  # the lost node's session is not
    # The node itself is fine (only the directory says otherwise): clean up there.
    two_nodes[1].client().delete_session(split_id(sids[1])[1])


def test_an_image_template_is_baked_on_every_node_and_each_store_answers(
    fleet_client: FleetClient, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.node.images._rootfs import rootfs_layout

    layout = rootfs_layout("bookworm-nopy", tmp_path_factory.mktemp("fleet-image"))
    ref = f"oci:{layout}:v1"
    fleet_client.bake_template("fleet-image", [], image=ref)
    assert "fleet-image" in fleet_client.templates()
    # (the two nodes share one store: each lists what the store holds)
    rows = [row for row in fleet_client.store_images() if str(layout) in row["id"]]
    assert sorted(row["node"] for row in rows) == ["n00000001", "n00000002"]
    assert all("fleet-image" in row["used_by"] for row in rows)
    assert set(fleet_client.image_pulls()) == {"n00000001", "n00000002"}
    with Sandbox("fleet-image", client=fleet_client) as box:  # an image session, on a node
        out = box.exec(command="cat /etc/debian_version")
        assert out.exit_code == 0 and out.stdout.startswith("12.")
    pruned = fleet_client.prune_images()
    assert set(pruned) == {"n00000001", "n00000002"}
    # still in use by the template: not pruned
    assert len([r for r in fleet_client.store_images() if str(layout) in r["id"]]) == 2
