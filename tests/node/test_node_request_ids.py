"""Request ids: every answer carries one, the node's log line names it, the SDK's error has it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from collimate_rl.errors import CollimateNotFoundError, CollimateServerError
from collimate_rl.node import LocalNode
from collimate_rl.wire.daemon import AsyncCollimateClient, CollimateClient

from .conftest import ThreadedNode, python_template


def _log_lines(path: Path, needle: str, timeout: float = 10.0) -> list[str]:
    """The log's lines naming ``needle`` (the access line is written as the answer leaves)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [line for line in path.read_text().splitlines() if needle in line]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_every_answer_carries_an_id_and_a_clients_own_is_kept(
    node_factory: Callable[..., ThreadedNode],
) -> None:
    node = node_factory()
    template = python_template(node.runtime.templates())
    with node.client() as http:
        ids = {
            http.get("/v1/health").headers["x-request-id"],
            http.get("/v1/sessions/ses_nope").headers["x-request-id"],
            http.get("/no/such/route").headers["x-request-id"],
            http.post("/v1/exec", json={"template_id": template, "command": "true"}).headers[
                "x-request-id"
            ],
        }
        assert len(ids) == 4 and all(i.startswith("req_") and len(i) == 20 for i in ids)
        mine = http.get("/v1/health", headers={"X-Request-Id": "trainer-3.step-41:item-7"})
        assert mine.headers["x-request-id"] == "trainer-3.step-41:item-7"
        # a malformed one (spaces, too long) is replaced, never echoed
        for bad in ("has space", "x" * 129):
            got = http.get("/v1/health", headers={"X-Request-Id": bad}).headers["x-request-id"]
            assert got.startswith("req_") and got != bad


def test_a_401_carries_an_id_too(node_factory: Callable[..., ThreadedNode]) -> None:
    node = node_factory(token="a-token-for-request-ids")
    with node.client() as http:
        resp = http.get("/v1/health")
    assert resp.status_code == 401 and resp.headers["x-request-id"].startswith("req_")


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_trainers_error_names_the_nodes_log_line(log_format: str) -> None:
    with LocalNode(
        tcp=True, pool_size=0, extra_args=("--log-format", log_format, "--log-level", "info")
    ) as node:
        client = node.client(retries=0)
        with pytest.raises(CollimateNotFoundError) as caught:
            client.session_exec("ses_gone_long_ago", command="true")
        request_id = caught.value.request_id
        assert request_id is not None and request_id.startswith("req_")
        assert request_id in str(caught.value)  # a trainer's traceback shows it too
        assert node.log_path is not None
        lines = _log_lines(node.log_path, request_id)
    assert len(lines) == 1, lines
    if log_format == "json":
        line = json.loads(lines[0])
        assert line["request_id"] == request_id
        assert line["status"] == 404
        assert line["path"] == "/v1/sessions/ses_gone_long_ago/exec"
        assert line["level"] == "INFO" and line["logger"] == "collimate_rl.node.access"
    else:
        assert f"[{request_id}]" in lines[0] and " 404 " in lines[0]


def test_json_logs_are_json_from_the_first_line() -> None:
    with LocalNode(
        tcp=True, pool_size=0, extra_args=("--log-format", "json", "--log-level", "info")
    ) as node:
        with node.http() as http:
            http.get("/v1/health")
        assert node.log_path is not None
        text = node.log_path.read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "the node logged nothing"
    parsed = [json.loads(line) for line in lines]  # uvicorn's own lines too
    assert any("serving on" in p["message"] for p in parsed)
    assert all({"time", "level", "logger", "message"} <= set(p) for p in parsed)


def _answer_without_id(request: httpx.Request) -> httpx.Response:
    return httpx.Response(404, json={"error": "no session", "error_code": "no_such_session"})


def test_a_daemon_without_ids_still_raises_the_typed_error() -> None:
    # a real daemon's answers carry no X-Request-Id: the error's id is None
    client = CollimateClient(
        "http://daemon.test", transport=httpx.MockTransport(_answer_without_id)
    )
    with pytest.raises(CollimateServerError) as caught:
        client.session_exec("ses_1", command="true")
    assert caught.value.request_id is None
    assert str(caught.value) == "HTTP 404: no session"


@pytest.mark.anyio
async def test_the_async_client_reads_the_id(node_factory: Callable[..., ThreadedNode]) -> None:
    node = node_factory()
    async with AsyncCollimateClient(node.base_url, retries=0) as client:
        with pytest.raises(CollimateNotFoundError) as caught:
            await client.session_exec("ses_nope", command="true")
    assert (caught.value.request_id or "").startswith("req_")


def test_a_batch_items_error_names_the_batch_request(
    node_factory: Callable[..., ThreadedNode],
) -> None:
    node = node_factory()
    template = python_template(node.runtime.templates())
    with CollimateClient(node.base_url, retries=0) as client:
        ok, gone = client.exec_batch(
            [
                {"template_id": template, "command": "true"},
                {"session_id": "ses_gone", "command": "true"},
            ]
        )
    assert ok.exit_code == 0
    assert isinstance(gone, CollimateNotFoundError)
    assert (gone.request_id or "").startswith("req_") and gone.request_id in str(gone)
    with node.client() as http:
        resp = http.post(
            "/v1/exec/batch", json={"items": [{"session_id": "ses_x", "command": "true"}]}
        )
    assert resp.json()["results"][0]["request_id"] == resp.headers["x-request-id"]
