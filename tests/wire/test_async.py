"""The async twins: main paths and retry rules through the async drivers."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from collimate_rl.errors import CollimateCapacityError, CollimateServerError, GatewayError
from collimate_rl.wire import AsyncCollimateClient, AsyncGatewayClient

from ._fake_gateway import FakeGateway, envelope
from ._server import Reply, ScriptedServer

pytestmark = pytest.mark.anyio

PRO = "col_pro_abcd1234_" + "s" * 32


def _async_client(srv: ScriptedServer, sleeps: list[float], **kw: Any) -> AsyncCollimateClient:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return AsyncCollimateClient(**srv.client_kwargs, sleep=sleep, rng=random.Random(5), **kw)


async def test_session_lifecycle(server: ScriptedServer, sleeps: list[float]) -> None:
    server.script("GET", "/v1/health", Reply(200, {"status": "ok", "templates": ["py"]}))
    server.script("POST", "/v1/sessions", Reply(201, {"session_id": "s1", "template_id": "py"}))
    server.script("POST", "/v1/sessions/s1/exec", Reply(200, {"stdout": "1\n", "exit_code": 0}))
    server.script(
        "POST", "/v1/sessions/s1/fork", Reply(201, {"parent": "s1", "children": [{"id": "c1"}]})
    )
    server.script("GET", "/v1/sessions/s1", Reply(200, {"session_id": "s1"}))
    server.script("GET", "/v1/sessions", Reply(200, [{"session_id": "s1"}]))
    server.script("POST", "/v1/exec", Reply(200, {"stdout": "2\n"}))
    server.script("DELETE", "/v1/sessions/s1", Reply(200, {"deleted": True, "session_id": "s1"}))
    async with _async_client(server, sleeps) as client:
        assert await client.templates() == ["py"]
        sid = (await client.create_session("py"))["session_id"]
        assert (await client.session_exec(sid, code="print(1)")).stdout == "1\n"
        assert (await client.fork_session(sid, 1)).session_ids == ["c1"]
        assert (await client.get_session(sid)).session_id == "s1"
        assert [s.session_id for s in await client.list_sessions()] == ["s1"]
        assert (await client.exec_once("py", command="echo 2"))["stdout"] == "2\n"
        assert (await client.delete_session(sid)).deleted
        assert (await client.delete_session("unknown")).deleted is False
    assert client._http.is_closed


async def test_at_capacity_retried_then_typed(server: ScriptedServer, sleeps: list[float]) -> None:
    cap = Reply(503, {"error": "full", "error_code": "at_capacity"})
    server.script("POST", "/v1/sessions", *[cap] * 3)
    async with _async_client(server, sleeps, retries=2) as client:
        with pytest.raises(CollimateCapacityError):
            await client.create_session("py")
    assert len(server.calls()) == 3 and len(sleeps) == 2


async def test_503_without_code_on_exec_is_not_retried(
    server: ScriptedServer, sleeps: list[float]
) -> None:
    server.script("POST", "/v1/sessions/s1/exec", Reply(503, {"error": "x"}))
    async with _async_client(server, sleeps) as client:
        with pytest.raises(CollimateServerError):
            await client.session_exec("s1", command="true")
    assert len(server.calls()) == 1 and sleeps == []


@pytest.fixture
def gw() -> Iterator[tuple[ScriptedServer, FakeGateway]]:
    srv = ScriptedServer("tcp").start()
    fake = FakeGateway(PRO)
    srv.fallback = fake
    yield srv, fake
    srv.stop()


async def _noop(seconds: float) -> None:
    pass


async def test_gateway_exec_once_reaps_on_failure(gw: Any) -> None:
    srv, fake = gw
    fake.exec_reply = envelope(500, "upstream_error", "guest died")
    async with AsyncGatewayClient(PRO, srv.url, sleep=_noop) as client:
        with pytest.raises(GatewayError, match="guest died"):
            await client.exec_once("python311", command="true")
        fake.exec_reply = None
        assert (await client.exec_once("python311", command="true")).ok
    assert fake.deleted == ["sb-1", "sb-2"] and fake.sandboxes == {}


async def test_gateway_fork_and_surface(gw: Any) -> None:
    srv, _fake = gw
    srv.script("POST", "/v1/sandboxes", envelope(503, "at_capacity", "full"))
    async with AsyncGatewayClient(PRO, srv.url, sleep=_noop) as client:
        parent = str((await client.create_session("python311")).session_id)
        resp = await client.fork(parent, count=40)
        assert len(resp.children) == 40
        counts = [c.body["count"] for c in srv.calls("POST", f"/v1/sandboxes/{parent}/fork")]
        assert counts == [32, 8]
        assert (await client.images())[0].visibility == "public"
        assert (await client.get_session(parent)).template_id == "python311"
        assert len(await client.list_sessions()) == 41
        assert (await client.suspend(parent)).state == "suspended"
        assert (await client.cdp_url(parent)).endswith("protocol=cdp")
        assert (await client.usage(from_ts="a")).from_ts == "a"
        assert (await client.delete_session(parent)).deleted
