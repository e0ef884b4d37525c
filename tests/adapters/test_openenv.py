"""Our envs served by openenv-core's own server, driven by openenv-core's own clients over WebSocket."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.adapters.conftest import ADD_GT, BAD, GOOD

pytest.importorskip("openenv.core")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from openenv.core import GenericEnvClient  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from collimate_rl.openenv import (  # noqa: E402
    CollimateAction,
    CollimateEnvClient,
    create_app,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(app: Any) -> Iterator[str]:
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def code_url(socket_path: str) -> Iterator[str]:
    yield from _run(create_app("collimate/Code-v0", max_concurrent_envs=4, unix_socket=socket_path))


@pytest.fixture(scope="module")
def feedback_url(socket_path: str) -> Iterator[str]:
    yield from _run(create_app("collimate/CodeFeedback-v0", max_turns=3, unix_socket=socket_path))


@pytest.fixture(scope="module")
def shell_url(socket_path: str) -> Iterator[str]:
    yield from _run(
        create_app("collimate/Shell-v0", max_concurrent_envs=3, unix_socket=socket_path)
    )


def test_typed_client_runs_a_code_episode(code_url: str) -> None:
    async def episode() -> Any:
        async with CollimateEnvClient(base_url=code_url) as env:
            first = await env.reset(ground_truth=ADD_GT, prompt="Write add(a, b).")
            assert first.observation.text == "Write add(a, b)." and not first.done
            result = await env.step(CollimateAction(text=GOOD))
            state = await env.state()
            return result, state

    result, state = asyncio.run(episode())
    assert result.done and result.reward == 1.0
    assert (
        result.observation.info["passed"] == 3 and result.observation.info["infra_error"] is False
    )
    assert state.step_count == 1 and state.env_id == "collimate/Code-v0"


def test_generic_client_and_task_ids(code_url: str) -> None:
    async def episode() -> Any:
        async with GenericEnvClient(base_url=code_url) as env:
            first = await env.reset(task_id="basic/count-vowels", seed=3)
            result = await env.step({"text": "def count_vowels(s):\n    return 0\n"})
            return first, result

    first, result = asyncio.run(episode())
    assert "vowel" in first.observation["text"].lower()
    assert first.observation["info"]["task_id"] == "basic/count-vowels"
    assert result.done and 0.0 <= result.reward < 1.0


def test_sync_wrapper_multi_turn_feedback(feedback_url: str) -> None:
    with GenericEnvClient(base_url=feedback_url).sync() as env:
        env.reset(ground_truth=ADD_GT, prompt="Write add(a, b).")
        first = env.step({"text": BAD})
        assert not first.done and "passed 0/3" in first.observation["text"]
        second = env.step({"text": GOOD})
        assert second.done and second.reward == 1.0


class _AllArrived:
    """Holds each task at ``wait()`` until ``parties`` have arrived (asyncio.Barrier is 3.11+)."""

    def __init__(self, parties: int) -> None:
        self.missing = parties
        self.event = asyncio.Event()

    async def wait(self) -> None:
        self.missing -= 1
        if self.missing == 0:
            self.event.set()
        await self.event.wait()


def test_concurrent_sessions_each_get_their_own_sandbox(shell_url: str, local_client: Any) -> None:
    before = {s["session_id"] for s in local_client.list_sessions()}

    async def one(i: int, opened: _AllArrived) -> str:
        async with CollimateEnvClient(base_url=shell_url) as env:
            await env.reset(task_id="shell/fix-config")
            out = await env.step(
                CollimateAction(text=f"echo session-{i} > mine.txt && cat mine.txt")
            )
            await opened.wait()  # every session is open at once here
            listing = await env.step(CollimateAction(text="cat mine.txt"))
            assert f"session-{i}" in out.observation.text
            return str(listing.observation.text)

    async def main() -> list[str]:
        opened = _AllArrived(3)
        return await asyncio.gather(*(one(i, opened) for i in range(3)))

    texts = asyncio.run(main())
    for i, text in enumerate(texts):
        assert f"session-{i}" in text and all(
            f"session-{j}" not in text for j in range(3) if j != i
        )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if {s["session_id"] for s in local_client.list_sessions()} <= before:
            break
        time.sleep(0.1)
    assert {s["session_id"] for s in local_client.list_sessions()} <= before


def test_capacity_is_openenvs(shell_url: str) -> None:
    async def main() -> None:
        clients = [CollimateEnvClient(base_url=shell_url) for _ in range(4)]
        try:
            for c in clients[:3]:
                await c.connect()
                await c.reset(task_id="shell/fix-config")
            # The server answers CAPACITY_REACHED and closes the socket; depending on
            # which the client sees first, that is a server error or a closed connection.
            with pytest.raises((RuntimeError, ConnectionClosed)) as refused:
                await clients[3].connect()
                await clients[3].reset()
            if isinstance(refused.value, RuntimeError):
                assert "capacity" in str(refused.value).lower()
        finally:
            for c in clients:
                await c.close()

    asyncio.run(main())


def test_http_endpoints(code_url: str) -> None:
    assert httpx.get(code_url + "/health").json()["status"] == "healthy"
    schema = httpx.get(code_url + "/schema").json()
    assert "text" in schema["action"]["properties"]
    reset = httpx.post(code_url + "/reset", json={"task_id": "basic/count-vowels"}).json()
    assert reset["done"] is False and "vowel" in reset["observation"]["text"].lower()


def test_server_errors_reach_the_client(code_url: str) -> None:
    async def main() -> None:
        async with CollimateEnvClient(base_url=code_url) as env:
            with pytest.raises(RuntimeError, match="reset"):
                await env.step(CollimateAction(text="x"))

    asyncio.run(main())


def test_the_server_binds_loopback_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from collimate_rl.openenv.__main__ import main

    binds: list[str] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port: binds.append(host))
    with caplog.at_level("WARNING", logger="collimate_rl.openenv"):
        main(["--port", "0"])
        ours = [r for r in caplog.records if r.name.startswith("collimate_rl")]
        assert binds == ["127.0.0.1"] and ours == []  # (other tests' servers may still log)
        main(["--port", "0", "--host", "0.0.0.0"])  # the explicit opt-in: served, with a warning
    assert binds[-1] == "0.0.0.0"
    assert "listens on 0.0.0.0" in caplog.text and "docs/security.md" in caplog.text
