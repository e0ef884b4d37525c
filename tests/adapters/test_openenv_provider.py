"""``CollimateProvider`` end to end: OpenEnv's own client, an env server inside a real sandbox.

The node shares its site-packages (``share_site_packages``), so the sandbox
imports openenv-core; the template is baked with :class:`Ready` in two
stages (files, then the service), as a user would. The gateway path runs the
same sandboxes behind a contract-faithful fake gateway (connect-url and its
WebSocket tunnel). Every test checks that no session, relay socket or tunnel
is left.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv.core")

from openenv.core import GenericEnvClient

from collimate_rl.errors import (
    CollimateError,
    CollimateNotFoundError,
    CollimateServerError,
    CollimateUsageError,
    GatewayError,
)
from collimate_rl.node import LocalNode
from collimate_rl.openenv import CollimateProvider
from collimate_rl.templates import Ready, Template
from collimate_rl.wire import GatewayClient
from tests.adapters._tunnel_gateway import TunnelGateway

SERVER = Path(__file__).with_name("_echo_env_server.py")
UVICORN = "exec python3 -m uvicorn echo_server:app --host 127.0.0.1 --port 8000"
TTL = 6.0


def _write_file_cmd(name: str, data: bytes) -> str:
    b64 = base64.b64encode(data).decode()
    return f"python3 -c \"import base64; open('{name}','wb').write(base64.b64decode('{b64}'))\""


@pytest.fixture(scope="module")
def node() -> Iterator[LocalNode]:
    with LocalNode(share_site_packages=True, pool_size=0, session_ttl=TTL) as n:
        yield n


@pytest.fixture(scope="module")
def client(node: LocalNode) -> Iterator[Any]:
    c = node.client()
    Template.bake(
        c,
        name="echo-files",
        image="python3",
        ready=Ready(cmd=_write_file_cmd("echo_server.py", SERVER.read_bytes())),
        width=1,
    )
    Template.bake(
        c,
        name="echo-env",
        image="echo-files",
        ready=Ready(cmd=UVICORN, ports=[8000], http="/health", http_timeout_s=180),
        width=1,
    )
    web = "exec python3 -m http.server 8000 --bind 127.0.0.1"
    # answers / but not /health: never ready for OpenEnv
    Template.bake(c, name="no-health", image="python3", ready=Ready(cmd=web, ports=[8000]), width=1)
    # answers /health (a file) but has no /ws: OpenEnv's connect fails
    Template.bake(c, name="health-files", image="python3", ready=Ready(cmd="touch health"), width=1)
    Template.bake(
        c, name="no-ws", image="health-files", ready=Ready(cmd=web, ports=[8000]), width=1
    )
    Template.bake(
        c,
        name="crash-env",
        image="python3",
        ready=Ready(cmd="echo env-crashed >&2; exit 3", ports=[8000], http="/health"),
        width=1,
    )
    yield c
    c.close()


@pytest.fixture(autouse=True)
def _clean(node: LocalNode, client: Any) -> Iterator[None]:
    yield
    assert client.list_sessions() == []
    assert node.workdir is not None
    left = [p.name for p in (node.workdir / "state" / "t").glob("*/socks/*")]
    assert left == ["master.sock"] * len(left)


def _refused(base_url: str) -> bool:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_from_docker_image_serves_an_env_from_a_sandbox(client: Any) -> None:
    provider = CollimateProvider(client, ready_timeout=180)

    async def episode() -> tuple[Any, Any, str, str]:
        env = await GenericEnvClient.from_docker_image("echo-env", provider=provider)
        try:
            assert provider.session_id in {s.session_id for s in client.list_sessions()}
            first = await env.reset()
            second = await env.step({"text": "hello"})
            url, sid = str(provider.base_url), str(provider.session_id)
        finally:
            await env.close()
        return first, second, url, sid

    first, second, url, _ = asyncio.run(episode())
    assert first.observation == {"echoed": "ready"} and first.done is False
    assert second.observation == {"echoed": "hello"} and second.reward == 5.0
    assert provider.session_id is None and provider.base_url is None
    assert _refused(url)
    provider.stop_container()  # idempotent


def test_an_image_name_resolves_to_a_template_and_a_connection_outlives_the_ttl(
    client: Any,
) -> None:
    provider = CollimateProvider(client, ready_timeout=180)

    async def episode() -> Any:
        async with await provider.launch(GenericEnvClient, "ghcr.io/acme/echo-env:v1") as env:
            await env.reset()
            await asyncio.sleep(TTL + 3)  # no exec, but the env's WebSocket is open
            return await env.step({"text": "still here"})

    result = asyncio.run(episode())
    assert result.observation == {"echoed": "still here"}
    assert provider.session_id is None


def test_bad_requests_fail_typed_and_create_nothing(client: Any) -> None:
    provider = CollimateProvider(client)
    with pytest.raises(CollimateUsageError, match="env_vars"):
        provider.start_container("echo-env", env_vars={"A": "1"})
    with pytest.raises(CollimateNotFoundError):
        provider.start_container("no-such-template")
    with pytest.raises(CollimateError, match="exposes no port 8000"):
        provider.start_container("python3")  # a session without a service
    with pytest.raises(CollimateError, match="exposes no port 9000"):
        provider.start_container("no-health", port=9000)
    assert provider.session_id is None


def test_async_clients_and_unknown_options_are_refused(node: LocalNode) -> None:
    from collimate_rl.wire import AsyncCollimateClient

    provider = CollimateProvider(AsyncCollimateClient(unix_socket=str(node.socket_path)))
    with pytest.raises(CollimateUsageError, match="blocking client"):
        provider.start_container("echo-env")
    with pytest.raises(CollimateUsageError, match="unknown start_container options"):
        CollimateProvider(object()).start_container("echo-env", replicas=2)


def test_a_server_that_never_gets_healthy_times_out_and_is_reaped(client: Any) -> None:
    provider = CollimateProvider(client, ready_timeout=1.5)
    with pytest.raises(TimeoutError, match=r"not ready within 1\.5s"):
        provider.start_container("no-health")
    assert provider.session_id is None


def test_a_crashing_server_fails_the_create_with_its_output(client: Any) -> None:
    provider = CollimateProvider(client)
    with pytest.raises(CollimateServerError, match="env-crashed") as info:
        provider.start_container("crash-env")
    assert info.value.error_code == "service_not_ready"


def test_a_failed_websocket_connect_reaps_the_sandbox(client: Any) -> None:
    provider = CollimateProvider(client, ready_timeout=30)
    with pytest.raises(ConnectionError, match="/ws"):  # OpenEnv's connect error
        asyncio.run(provider.launch(GenericEnvClient, "no-ws"))
    assert provider.session_id is None


def _run_client_process(node: LocalNode, tail: str) -> str:
    code = textwrap.dedent(
        f"""
        import os, signal, sys
        from collimate_rl.wire import CollimateClient
        from collimate_rl.openenv import CollimateProvider
        client = CollimateClient(unix_socket={str(node.socket_path)!r})
        provider = CollimateProvider(client, ready_timeout=30)
        provider.start_container("no-ws")
        print(provider.session_id, flush=True)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code + textwrap.dedent(tail)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.stdout.startswith("ses_"), out.stderr
    return out.stdout.split()[0]


def test_a_client_that_exits_without_stopping_is_reaped_at_exit(
    node: LocalNode, client: Any
) -> None:
    sid = _run_client_process(node, "sys.exit(0)\n")
    assert sid not in {s.session_id for s in client.list_sessions()}


def test_a_killed_client_leaves_an_idle_sandbox_to_the_ttl_reaper(
    node: LocalNode, client: Any
) -> None:
    sid = _run_client_process(node, "os.kill(os.getpid(), signal.SIGKILL)\n")
    assert sid in {s.session_id for s in client.list_sessions()}
    deadline = time.monotonic() + TTL * 4
    while sid in {s.session_id for s in client.list_sessions()}:
        assert time.monotonic() < deadline, "the idle service session was not reaped"
        time.sleep(0.5)


@pytest.fixture()
def gateway(client: Any) -> Iterator[TunnelGateway]:
    gw = TunnelGateway(client)
    try:
        yield gw
    finally:
        gw.close()
    assert gw.sandboxes == {} and gw.tunnels_open == 0


def test_through_the_gateway_the_provider_tunnels_a_local_url(
    client: Any, gateway: TunnelGateway
) -> None:
    gw_client = GatewayClient(api_key=gateway.api_key, base_url=gateway.base_url)
    provider = CollimateProvider(gw_client, ready_timeout=180)

    async def episode() -> tuple[Any, str]:
        env = await provider.launch(GenericEnvClient, "echo-env")
        try:
            url = str(provider.base_url)
            await env.reset()
            return await env.step({"text": "via tunnel"}), url
        finally:
            await env.close()

    result, url = asyncio.run(episode())
    assert url.startswith("http://127.0.0.1:")  # not the gateway's internal endpoint
    assert result.observation == {"echoed": "via tunnel"} and result.reward == 10.0
    assert gateway.minted >= 1
    assert _refused(url)
    gw_client.close()


def test_through_the_gateway_an_unexposed_port_is_reaped(
    client: Any, gateway: TunnelGateway
) -> None:
    gw_client = GatewayClient(api_key=gateway.api_key, base_url=gateway.base_url)
    provider = CollimateProvider(gw_client)
    with pytest.raises(GatewayError, match="Ready\\(ports=\\[8000\\]\\)") as info:
        provider.start_container("python3")
    assert info.value.error_code == "port_not_exposed"
    assert provider.session_id is None
    gw_client.close()
