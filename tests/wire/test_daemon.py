"""The daemon client against a real HTTP server, over TCP and a unix socket."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from collimate_rl.errors import (
    CollimateDrainingError,
    CollimateError,
    CollimateNotFoundError,
    CollimateServerError,
    CollimateUsageError,
)
from collimate_rl.wire import CollimateClient, ExecResponse, Health

from ._server import Reply, ScriptedServer

MakeClient = Callable[..., CollimateClient]
SEED = "ab" * 32

EXEC_OK = {
    "stdout": "hi\n",
    "stderr": "",
    "exit_code": 0,
    "fork_time_ms": 0.3,
    "exec_time_ms": 4.0,
    "total_time_ms": 4.5,
    "seed": SEED,
    "seed_ack": "off",
    "id": "req_0123456789abcdef",
}


def test_health(server: ScriptedServer, make_client: MakeClient) -> None:
    server.script(
        "GET",
        "/v1/health",
        Reply(200, {"status": "ok", "sessions": 2, "templates": ["py"], "isolation": "bwrap"}),
    )
    health = make_client(server).health()
    assert isinstance(health, Health)
    assert (health.status, health.sessions, health.templates) == ("ok", 2, ("py",))
    assert health["isolation"] == "bwrap" and health.raw["isolation"] == "bwrap"
    assert not health.draining
    (rec,) = server.calls()
    assert rec.headers["content-type"] == "application/json" and rec.raw == b""


def test_templates(server: ScriptedServer, make_client: MakeClient) -> None:
    server.script("GET", "/v1/health", Reply(200, {"status": "ok", "templates": ["py", "sh"]}))
    assert make_client(server).templates() == ["py", "sh"]


def test_list_sessions(server: ScriptedServer, make_client: MakeClient) -> None:
    row = {
        "session_id": "s1",
        "template_id": "py",
        "age_secs": 1,
        "idle_secs": 0.5,
        "exec_count": 3,
    }
    server.script("GET", "/v1/sessions", Reply(200, [row]), Reply(200, {"not": "a list"}))
    client = make_client(server)
    (info,) = client.list_sessions()
    assert info.session_id == "s1" and info.age_secs == 1.0 and info["exec_count"] == 3
    assert client.list_sessions() == []


def test_create_session(server: ScriptedServer, make_client: MakeClient) -> None:
    created = {
        "session_id": "s1",
        "template_id": "py",
        "fork_time_ms": 0.2,
        "create_time_ms": 3,
        "endpoints": {"8000": "10.0.0.2:8000"},
    }
    server.script("POST", "/v1/sessions", Reply(201, created))
    resp = make_client(server).create_session("py", egress={"mode": "none"})
    assert resp["session_id"] == "s1" and resp.session_id == "s1"
    assert resp.endpoints == {"8000": "10.0.0.2:8000"} and resp.create_time_ms == 3.0
    assert resp == created
    assert server.calls()[0].body == {"template_id": "py", "egress": {"mode": "none"}}


def test_get_session(server: ScriptedServer, make_client: MakeClient) -> None:
    server.script("GET", "/v1/sessions/s1", Reply(200, {"session_id": "s1", "template_id": "py"}))
    assert make_client(server).get_session("s1").template_id == "py"


def test_get_session_not_found_is_typed(server: ScriptedServer, make_client: MakeClient) -> None:
    server.script(
        "GET",
        "/v1/sessions/nope",
        Reply(404, {"error": "no such session", "error_code": "no_such_session"}),
    )
    with pytest.raises(CollimateNotFoundError) as info:
        make_client(server).get_session("nope")
    assert (info.value.status, info.value.error_code) == (404, "no_such_session")
    assert str(info.value) == "HTTP 404: no such session"


def test_delete_session(server: ScriptedServer, make_client: MakeClient) -> None:
    server.script("DELETE", "/v1/sessions/s1", Reply(200, {"deleted": True, "session_id": "s1"}))
    resp = make_client(server).delete_session("s1")
    assert resp.deleted and resp["deleted"] is True and resp.session_id == "s1"


@pytest.mark.parametrize(
    "reply",
    [
        Reply(404, {"deleted": False, "session_id": "s1"}),
        Reply(410, {"error": "gone", "error_code": "session_gone"}),
        Reply(500, raw=b"boom"),
    ],
)
def test_delete_session_never_raises(
    server: ScriptedServer, make_client: MakeClient, reply: Reply
) -> None:
    server.script("DELETE", "/v1/sessions/s1", *[reply] * 4)
    assert make_client(server).delete_session("s1") == {"deleted": False, "session_id": "s1"}


def test_delete_session_swallows_transport_errors(make_client: MakeClient) -> None:
    client = make_client(unix_socket="/tmp/definitely-not-a-collimate.sock", retries=1)
    assert client.delete_session("s1") == {"deleted": False, "session_id": "s1"}


def test_session_exec(server: ScriptedServer, make_client: MakeClient) -> None:
    server.script("POST", "/v1/sessions/s1/exec", Reply(200, EXEC_OK))
    files = [{"path": "/tmp/a.py", "content": "print('hi')"}]
    resp = make_client(server).session_exec(
        "s1", code="print(1)", files=files, timeout_seconds=7, seed=SEED
    )
    assert isinstance(resp, ExecResponse)
    assert resp["stdout"] == "hi\n" and resp.get("seed") == SEED and "seed_ack" in resp
    assert resp.ok and resp.raw["id"].startswith("req_")
    assert server.calls()[0].body == {
        "timeout_seconds": 7,
        "code": "print(1)",
        "files": files,
        "seed": SEED,
    }


def test_session_exec_commands(server: ScriptedServer, make_client: MakeClient) -> None:
    server.script("POST", "/v1/sessions/s1/exec", Reply(200, EXEC_OK))
    make_client(server).session_exec("s1", commands=[["echo", "hi there"]], files=[])
    assert server.calls()[0].body == {"timeout_seconds": 30, "commands": [["echo", "hi there"]]}


def test_exec_once(server: ScriptedServer, make_client: MakeClient) -> None:
    server.script("POST", "/v1/exec", Reply(200, {**EXEC_OK, "exit_code": -1}))
    resp = make_client(server).exec_once("py", command="sleep 9", egress={"mode": "none"})
    assert resp.exit_code == -1 and not resp.ok
    assert server.calls()[0].body == {
        "timeout_seconds": 30,
        "template_id": "py",
        "command": "sleep 9",
        "egress": {"mode": "none"},
    }


def test_exec_batch_sends_a_one_shot_item_s_egress(
    server: ScriptedServer, make_client: MakeClient
) -> None:
    server.script("POST", "/v1/exec/batch", Reply(200, {"results": [EXEC_OK, EXEC_OK]}))
    client = make_client(server)
    items = [
        {"template_id": "py-net", "code": "1", "egress": {"mode": "none"}},
        {"session_id": "s1", "code": "2"},
    ]
    assert [r.ok for r in client.exec_batch(items)] == [True, True]
    assert server.calls()[0].body["items"] == [
        {"timeout_seconds": 30, "template_id": "py-net", "code": "1", "egress": {"mode": "none"}},
        {"timeout_seconds": 30, "code": "2", "session_id": "s1"},
    ]
    with pytest.raises(CollimateUsageError, match="one-shot"):  # a session's policy is fixed
        client.exec_batch([{"session_id": "s1", "code": "2", "egress": {"mode": "none"}}])
    assert len(server.calls()) == 1


def test_fork_session(server: ScriptedServer, make_client: MakeClient) -> None:
    children = [
        {"id": f"c{i}", "session_id": f"c{i}", "template_id": "py", "fork_time_ms": 0.1}
        for i in range(3)
    ]
    server.script(
        "POST", "/v1/sessions/s1/fork", Reply(201, {"parent": "s1", "children": children})
    )
    resp = make_client(server).fork_session("s1", 3)
    assert resp.parent == "s1" and resp.session_ids == ["c0", "c1", "c2"]
    assert resp["children"][2]["session_id"] == "c2" and resp.children[0].fork_time_ms == 0.1
    assert server.calls()[0].body == {"count": 3}


def test_fork_session_adds_session_id(tcp_server: ScriptedServer, make_client: MakeClient) -> None:
    tcp_server.script("POST", "/v1/sessions/s1/fork", Reply(201, {"children": [{"id": "c1"}]}))
    resp = make_client(tcp_server).fork_session("s1", 1)
    assert resp.parent == "s1" and resp.children[0].session_id == "c1"


def test_images_is_gateway_only(make_client: MakeClient) -> None:
    client = make_client()
    for method in (client.images, client.list_images):
        with pytest.raises(CollimateError, match="gateway only"):
            method()


def test_empty_2xx_body_is_an_empty_object(
    tcp_server: ScriptedServer, make_client: MakeClient
) -> None:
    tcp_server.script("GET", "/v1/sessions/s1", Reply(200, raw=b""))
    assert make_client(tcp_server).get_session("s1") == {}


def test_error_without_envelope(tcp_server: ScriptedServer, make_client: MakeClient) -> None:
    tcp_server.script("GET", "/v1/sessions/s1", Reply(400, raw=b"<html>nope</html>"))
    with pytest.raises(CollimateServerError) as info:
        make_client(tcp_server).get_session("s1")
    assert str(info.value) == "HTTP 400: Bad Request" and info.value.error_code is None


def test_draining_health_is_data(tcp_server: ScriptedServer, make_client: MakeClient) -> None:
    tcp_server.script("GET", "/v1/health", Reply(200, {"status": "draining"}))
    assert make_client(tcp_server).health().draining


def test_draining_exec_is_retried_then_typed(
    tcp_server: ScriptedServer, make_client: MakeClient, sleeps: list[float]
) -> None:
    draining = Reply(503, {"error": "node draining", "error_code": "draining"})
    tcp_server.script("POST", "/v1/sessions/s1/exec", *[draining] * 3)
    with pytest.raises(CollimateDrainingError):
        make_client(tcp_server, retries=2).session_exec("s1", command="true")
    assert len(tcp_server.calls()) == 3 and len(sleeps) == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "one of command/code/commands is required"),
        ({"code": "x", "seed": "abc"}, "seed must be 64 hex"),
        ({"code": "x", "seed": "g" * 64}, "seed must be 64 hex"),
        ({"code": "x", "timeout_seconds": 0}, "timeout_seconds must be within 1..3600"),
        ({"code": "x", "timeout_seconds": 3601}, "timeout_seconds must be within 1..3600"),
        ({"code": "x", "files": [{"path": "/a"}]}, "files entry"),
        ({"commands": ["echo hi"]}, "argv lists"),
        ({"command": ["echo"]}, "command must be a str"),
    ],
)
def test_validation_before_sending(
    tcp_server: ScriptedServer, make_client: MakeClient, kwargs: dict[str, Any], message: str
) -> None:
    client = make_client(tcp_server)
    with pytest.raises(CollimateUsageError, match=message) as info:
        client.session_exec("s1", **kwargs)
    assert isinstance(info.value, ValueError)
    with pytest.raises(CollimateUsageError, match=message):
        client.exec_once("py", **kwargs)
    assert tcp_server.calls() == []


def test_bad_ids_and_counts_are_usage_errors(make_client: MakeClient) -> None:
    client = make_client()
    with pytest.raises(CollimateUsageError):
        client.get_session("")
    with pytest.raises(CollimateUsageError):
        client.create_session("")
    with pytest.raises(CollimateUsageError):
        client.fork_session("s1", 0)


def test_constructor_validation() -> None:
    with pytest.raises(CollimateUsageError):
        CollimateClient("127.0.0.1:8080")
    with pytest.raises(CollimateUsageError):
        CollimateClient(retries=-1)
    with pytest.raises(CollimateUsageError):
        CollimateClient(timeout=0)


def test_keep_alive_reuses_the_connection(server: ScriptedServer, make_client: MakeClient) -> None:
    server.script("GET", "/v1/health", *[Reply(200, {"status": "ok"})] * 5)
    client = make_client(server)
    for _ in range(5):
        client.health()
    assert len(server.calls()) == 5
    assert len({call.connection for call in server.calls()}) == 1


def test_context_manager_closes(server: ScriptedServer) -> None:
    server.script("GET", "/v1/health", Reply(200, {"status": "ok"}))
    with CollimateClient(**server.client_kwargs) as client:
        assert client.health().status == "ok"
    assert client._http.is_closed
    client.close()  # idempotent
