"""Reaping, the session cap, admission control, lost sessions and runtime failures."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from collimate_rl.node.core import NodeConfig
from collimate_rl.node.runtime.base import RuntimeError_

from .conftest import ThreadedNode, python_template
from .fakes import FakeRuntime, FakeSession
from .test_node_contract import assert_envelope

Make = Callable[..., ThreadedNode]


def test_ttl_reaping(node_factory: Make) -> None:
    node = node_factory(session_ttl=0.6, pool_size=0)
    tpl = python_template(node.runtime.templates())
    with node.client() as http:
        idle = http.post("/v1/sessions", json={"template_id": tpl}).json()["session_id"]
        busy = http.post("/v1/sessions", json={"template_id": tpl}).json()["session_id"]
        # A session in use is not reaped, even past the TTL.
        resp = http.post(f"/v1/sessions/{busy}/exec", json={"command": "sleep 1.2"})
        assert resp.status_code == 200
        deadline = time.monotonic() + 5
        while http.get(f"/v1/sessions/{idle}").status_code == 200:
            assert time.monotonic() < deadline, "idle session never reaped"
            time.sleep(0.05)
        assert_envelope(http.get(f"/v1/sessions/{idle}"), 404, "no_such_session")
        assert http.get("/v1/health").json()["sessions"] <= 1


def test_session_cap(node_factory: Make) -> None:
    node = node_factory(max_sessions=2, pool_size=1)
    tpl = python_template(node.runtime.templates())
    with node.client() as http:
        ids = [
            http.post("/v1/sessions", json={"template_id": tpl}).json()["session_id"] for _ in "ab"
        ]
        assert_envelope(http.post("/v1/sessions", json={"template_id": tpl}), 503, "at_capacity")
        assert_envelope(
            http.post(f"/v1/sessions/{ids[0]}/fork", json={"count": 1}), 503, "at_capacity"
        )
        http.delete(f"/v1/sessions/{ids[0]}")
        assert http.post("/v1/sessions", json={"template_id": tpl}).status_code == 201


@pytest.mark.anyio
async def test_admission_burst(node_factory: Make) -> None:
    node = node_factory(max_inflight=1, queue=0, pool_size=0)
    tpl = python_template(node.runtime.templates())
    async with node.async_client() as client:
        sid = (await client.post("/v1/sessions", json={"template_id": tpl})).json()["session_id"]
        results: list[tuple[int, dict[str, object]]] = []

        async def one(i: int) -> None:
            resp = await client.post(
                f"/v1/sessions/{sid}/exec",
                json={"command": f"echo run{i} >> ran.txt; sleep 1"},
            )
            results.append((resp.status_code, resp.json()))

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(one, i)
        ok = [body for status, body in results if status == 200]
        refused = [body for status, body in results if status == 503]
        assert len(ok) == 1 and len(refused) == 4
        assert all(body["error_code"] == "at_capacity" for body in refused)
        ran = (
            await client.post(f"/v1/sessions/{sid}/exec", json={"command": "cat ran.txt"})
        ).json()["stdout"]
        assert len(ran.splitlines()) == 1  # nothing ran for the refused ones
        health = (await client.get("/v1/health")).json()
        assert health["running"] == 0 and health["queued"] == 0


@pytest.mark.anyio
async def test_admission_queue_waits(node_factory: Make) -> None:
    node = node_factory(max_inflight=1, queue=2, pool_size=0)
    tpl = python_template(node.runtime.templates())
    async with node.async_client() as client:
        statuses: list[int] = []

        async def one() -> None:
            resp = await client.post("/v1/exec", json={"template_id": tpl, "command": "sleep 0.3"})
            statuses.append(resp.status_code)

        async def watch() -> None:
            await anyio.sleep(0.15)
            health = (await client.get("/v1/health")).json()
            assert health["running"] == 1 and health["queued"] == 2

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
            tg.start_soon(watch)
        assert sorted(statuses) == [200, 200, 200]


def _fake_node(tmp: Path, **config: object) -> ThreadedNode:
    runtime = FakeRuntime(state_dir=tmp / "state")
    return ThreadedNode(tmp, NodeConfig(**config), uds=False, runtime=runtime).start()  # type: ignore[arg-type]


def test_lost_session_is_410_then_gone(tmp_path: Path) -> None:
    node = _fake_node(tmp_path, pool_size=0)
    try:
        with node.client() as http:
            sid = http.post("/v1/sessions", json={"template_id": "python3"}).json()["session_id"]
            session = node.runtime.sessions[sid]  # type: ignore[attr-defined]
            assert isinstance(session, FakeSession)
            session.kill()
            assert_envelope(
                http.post(f"/v1/sessions/{sid}/exec", json={"command": "true"}), 410, "session_gone"
            )
            assert_envelope(http.get(f"/v1/sessions/{sid}"), 404, "no_such_session")
    finally:
        node.stop()


def test_runtime_failures_are_enveloped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _fake_node(tmp_path, pool_size=0)
    try:
        with node.client() as http:
            sid = http.post("/v1/sessions", json={"template_id": "python3"}).json()["session_id"]

            async def broken_create(*_: object) -> None:
                raise RuntimeError_("overlay mount failed\nwith a long\ntrace")

            monkeypatch.setattr(node.runtime, "create_session", broken_create)
            resp = http.post("/v1/sessions", json={"template_id": "python3"})
            assert_envelope(resp, 503, "session_bringup_failed")
            assert "\n" not in resp.json()["error"]

            async def exploding_exec(*_: object) -> None:
                raise ZeroDivisionError("boom")

            session = node.runtime.sessions[sid]  # type: ignore[attr-defined]
            monkeypatch.setattr(session, "exec", exploding_exec)
            resp = http.post(f"/v1/sessions/{sid}/exec", json={"command": "true"})
            assert_envelope(resp, 500, "internal_error")
            assert "Traceback" not in resp.text and "boom" not in resp.text
    finally:
        node.stop()


def test_close_leaves_nothing(tmp_path: Path) -> None:
    node = _fake_node(tmp_path, pool_size=2)
    with node.client() as http:
        for _ in range(3):
            http.post("/v1/sessions", json={"template_id": "python3"})
        sid = http.post("/v1/sessions", json={"template_id": "python3"}).json()["session_id"]
        http.post(f"/v1/sessions/{sid}/fork", json={"count": 2})
    node.stop()
    assert not (tmp_path / "state").exists()
    assert node.runtime.closed  # type: ignore[attr-defined]


def test_registry_unit_reap_and_pool() -> None:
    from collimate_rl.node.sessions import SessionRegistry

    async def scenario() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            runtime = FakeRuntime(state_dir=Path(tmp) / "s")
            await runtime.start()
            reg = SessionRegistry(runtime, max_sessions=4, ttl_seconds=10, pool_size=1)
            await reg.start()
            for _ in range(100):
                if reg.pooled("python3"):
                    break
                await asyncio.sleep(0.01)
            rec, fork_ms, _ = await reg.create("python3")
            assert fork_ms == 0.0
            rec.last_used -= 60
            assert [r.session_id for r in reg.reap_idle()] == [rec.session_id]
            await reg.close()
            await runtime.close()
            assert not runtime.sessions

    asyncio.run(scenario())


def test_admission_unit() -> None:
    from collimate_rl.node.admission import Admission, AtCapacity

    async def scenario() -> None:
        gate = Admission(max_inflight=2, max_queue=1)
        release = asyncio.Event()

        async def hold() -> None:
            async with gate.slot():
                await release.wait()

        tasks = [asyncio.create_task(hold()) for _ in range(3)]
        await asyncio.sleep(0.01)
        assert (gate.running, gate.queued) == (2, 1)
        with pytest.raises(AtCapacity):
            gate.check()
        release.set()
        await asyncio.gather(*tasks)
        await asyncio.wait_for(gate.wait_idle(), 1)
        assert (gate.running, gate.queued) == (0, 0)
        with pytest.raises(ValueError):
            Admission(0, 0)

    asyncio.run(scenario())


@pytest.mark.anyio
async def test_concurrent_one_shots_all_succeed(node_factory: Make) -> None:
    node = node_factory(max_inflight=4, queue=64, pool_size=2)
    tpl = python_template(node.runtime.templates())
    async with node.async_client() as client:
        results: list[tuple[int, str]] = []

        async def one(i: int) -> None:
            resp = await client.post("/v1/exec", json={"template_id": tpl, "code": f"print({i})"})
            results.append((resp.status_code, resp.json().get("stdout", "")))

        async with anyio.create_task_group() as tg:
            for i in range(24):
                tg.start_soon(one, i)
        assert sorted(results) == sorted((200, f"{i}\n") for i in range(24))
        assert (await client.get("/v1/sessions")).json() == []
        health = (await client.get("/v1/health")).json()
        assert (health["running"], health["queued"], health["sessions"]) == (0, 0, 0)


@pytest.mark.anyio
async def test_delete_during_exec_is_410_for_the_exec(node_factory: Make) -> None:
    node = node_factory(pool_size=0)
    tpl = python_template(node.runtime.templates())
    async with node.async_client() as client:
        sid = (await client.post("/v1/sessions", json={"template_id": tpl})).json()["session_id"]
        statuses: list[int] = []

        async def slow() -> None:
            resp = await client.post(f"/v1/sessions/{sid}/exec", json={"command": "sleep 5"})
            statuses.append(resp.status_code)
            if resp.status_code != 200:
                assert resp.json()["error_code"] == "session_gone"

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await anyio.sleep(0.5)
            assert (await client.delete(f"/v1/sessions/{sid}")).json()["deleted"] is True
        assert statuses in ([410], [200])


def test_exec_waits_for_a_fork_in_progress() -> None:
    from collimate_rl.node.sessions import SessionRegistry

    async def scenario() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            runtime = FakeRuntime(state_dir=Path(tmp) / "s")
            runtime.fork_delay = 0.3
            await runtime.start()
            reg = SessionRegistry(runtime, pool_size=0)
            await reg.start()
            rec, _, _ = await reg.create("python3")
            fork = asyncio.create_task(reg.fork(rec.session_id, 2))
            await asyncio.sleep(0.05)
            async with reg.using(rec.session_id):
                assert fork.done()  # the exec started only after the fork finished
            children, _ = await fork
            assert len(children) == 2 and len(reg) == 3
            await reg.close()
            await runtime.close()

    asyncio.run(scenario())


def test_drain_refuses_new_work_but_not_reads(node_factory: Make) -> None:
    import threading

    node = node_factory(pool_size=0, drain_timeout=10)
    tpl = python_template(node.runtime.templates())
    with node.client() as http:
        sid = http.post("/v1/sessions", json={"template_id": tpl}).json()["session_id"]
        busy = http.post("/v1/sessions", json={"template_id": tpl}).json()["session_id"]
        slow: list[int] = []

        def hold() -> None:  # in-flight work keeps the draining node up
            with node.client() as own:
                resp = own.post(f"/v1/sessions/{busy}/exec", json={"command": "sleep 1.5"})
                slow.append(resp.status_code)

        worker = threading.Thread(target=hold)
        worker.start()
        time.sleep(0.3)
        node.server.request_drain()
        deadline = time.monotonic() + 5
        while http.get("/v1/health").json()["status"] != "draining":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        for resp in (
            http.post("/v1/sessions", json={"template_id": tpl}),
            http.post(f"/v1/sessions/{sid}/exec", json={"command": "true"}),
            http.post(f"/v1/sessions/{sid}/fork", json={"count": 1}),
            http.post("/v1/exec", json={"template_id": tpl, "command": "true"}),
        ):
            assert_envelope(resp, 503, "draining")
        assert http.get(f"/v1/sessions/{sid}").status_code == 200
        assert http.get("/v1/sessions").status_code == 200
        assert http.delete(f"/v1/sessions/{sid}").status_code == 200
        worker.join(10)
    assert slow == [200]
    # Once the in-flight exec finished, the server stopped by itself.
    node.thread.join(10)
    assert not node.thread.is_alive()


def test_output_cap_sets_truncated(tmp_path: Path) -> None:
    from collimate_rl.node.runtime.base import Limits

    from .conftest import make_runtime

    runtime = make_runtime(tmp_path / "state", limits=Limits(output_cap_bytes=4096))
    node = ThreadedNode(tmp_path, NodeConfig(pool_size=0), uds=False, runtime=runtime).start()
    try:
        tpl = python_template(runtime.templates())
        with node.client() as http:
            big = http.post(
                "/v1/exec", json={"template_id": tpl, "code": "print('x' * 100000)"}
            ).json()
            assert big["truncated"] is True
            assert 0 < len(big["stdout"]) < 100000
            small = http.post("/v1/exec", json={"template_id": tpl, "code": "print(1)"}).json()
            assert "truncated" not in small
    finally:
        node.stop()
