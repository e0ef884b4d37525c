"""A request whose client goes away is cancelled: slot freed, processes killed, session kept.

The process-level proof (a worker SIGKILLed mid-``grade_batch``) is in
``tests/faults/test_disconnect.py``; here the same on an in-process node, per
route and per client (a raw HTTP client giving up, the async client cancelled),
and the registry's part: a create cancelled mid-bring-up closes its session.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import anyio
import httpx
import pytest

from collimate_rl.node.sessions import SessionRegistry
from collimate_rl.wire import AsyncCollimateClient

from .conftest import ThreadedNode, python_template
from .fakes import FakeRuntime

MakeNode = Callable[..., ThreadedNode]


def _until(what: str, ok: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for: {what}"
        time.sleep(0.02)


def _give_up(node: ThreadedNode, path: str, body: dict[str, object]) -> None:
    """Send ``body`` and hang up before the answer (the client's read timeout)."""
    with node.client(timeout=1.0) as http, pytest.raises(httpx.ReadTimeout):
        http.post(path, json=body)


def test_a_session_exec_whose_client_leaves_is_cancelled(node_factory: MakeNode) -> None:
    node = node_factory(max_inflight=1, queue=4, pool_size=0)
    template = python_template(node.runtime.templates())
    with node.client() as http:
        sid = http.post("/v1/sessions", json={"template_id": template}).json()["session_id"]
        _give_up(node, f"/v1/sessions/{sid}/exec", {"command": "sleep 600", "timeout_seconds": 600})
        _until("the slot freed", lambda: node.node.admission.running == 0)
        # the one slot is free for the next caller, and the session still works
        out = http.post(f"/v1/sessions/{sid}/exec", json={"command": "echo alive"}).json()
        assert out["stdout"] == "alive\n"
        assert http.delete(f"/v1/sessions/{sid}").json()["deleted"] is True


def test_a_one_shot_exec_whose_client_leaves_leaves_no_session(node_factory: MakeNode) -> None:
    node = node_factory(max_inflight=1, queue=4, pool_size=0)
    template = python_template(node.runtime.templates())
    _give_up(node, "/v1/exec", {"template_id": template, "command": "sleep 600"})
    _until("the slot freed", lambda: node.node.admission.running == 0)
    _until("the session deleted", lambda: len(node.node.sessions) == 0)


def test_a_queued_exec_whose_client_leaves_gives_up_its_place(node_factory: MakeNode) -> None:
    node = node_factory(max_inflight=1, queue=1, pool_size=0)
    template = python_template(node.runtime.templates())
    body = {"template_id": template, "command": "sleep 600", "timeout_seconds": 600}

    def occupy() -> None:  # holds the only slot for 4 s, then gives up too
        with node.client(timeout=4.0) as http, pytest.raises(httpx.ReadTimeout):
            http.post("/v1/exec", json=body)

    holder = threading.Thread(target=occupy)
    holder.start()
    try:
        _until("the slot taken", lambda: node.node.admission.running == 1)
        _give_up(node, "/v1/exec", body)  # waited in the queue, then left
        _until("the queue place freed", lambda: node.node.admission.queued == 0)
        assert node.node.admission.running == 1  # the holder is untouched
    finally:
        holder.join()
    _until("the slot freed", lambda: node.node.admission.running == 0)
    _until("no session left", lambda: len(node.node.sessions) == 0)


def test_cancelling_the_async_client_cancels_the_exec(node_factory: MakeNode) -> None:
    node = node_factory(max_inflight=1, queue=4, pool_size=0)
    template = python_template(node.runtime.templates())

    async def scenario() -> str:
        async with AsyncCollimateClient(node.base_url, retries=0) as client:
            sid = (await client.create_session(template))["session_id"]
            with anyio.move_on_after(1.0):  # the caller gives up: httpx closes the connection
                await client.session_exec(sid, command="sleep 600", timeout_seconds=600)
            for _ in range(500):
                if node.node.admission.running == 0:
                    break
                await anyio.sleep(0.02)
            assert node.node.admission.running == 0
            out = await client.session_exec(sid, command="echo next")
            await client.delete_session(sid)
            return str(out["stdout"])

    assert anyio.run(scenario) == "next\n"


@pytest.mark.anyio
async def test_a_create_cancelled_mid_bring_up_closes_its_session() -> None:
    runtime = FakeRuntime(create_delay=0.3)
    await runtime.start()
    registry = SessionRegistry(runtime, pool_size=0, ttl_seconds=None)
    try:
        create = asyncio.create_task(registry.create("python3"))
        await asyncio.sleep(0.1)  # the runtime is bringing the session up
        create.cancel()
        with pytest.raises(asyncio.CancelledError):
            await create
        for _ in range(100):
            if runtime.created and not runtime.sessions:
                break
            await asyncio.sleep(0.02)
        assert runtime.created == 1 and runtime.sessions == {}  # brought up, then closed
        assert len(registry) == 0
    finally:
        await registry.close()
        await runtime.close()
