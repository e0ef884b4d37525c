"""``connect()`` / ``connect_async()`` / ``from_env()``: the contract's resolution order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from collimate_rl.wire import (
    AsyncCollimateClient,
    AsyncGatewayClient,
    CollimateClient,
    GatewayClient,
    _env,
    connect,
    connect_async,
)

KEY = "col_pro_abcd1234_" + "s" * 32
ENV_KEY = "col_ent_abcd1234_" + "e" * 32
ENV_VARS = (
    "COLLIMATE_SERVE_SOCKET",
    "COLLIMATE_API_KEY",
    "COLLIMATE_BASE_URL",
    "COLLIMATE_SERVE_URL",
)


@pytest.fixture
def default_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A clean environment; the rule-7 socket path points into tmp (absent until touched)."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "serve.sock"
    monkeypatch.setattr(_env, "DEFAULT_SESSION_SOCKET", str(path))
    yield path


@pytest.fixture
def full_env(default_socket: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLLIMATE_SERVE_SOCKET", "/env/serve.sock")
    monkeypatch.setenv("COLLIMATE_API_KEY", ENV_KEY)
    monkeypatch.setenv("COLLIMATE_SERVE_URL", "http://10.0.0.6:8080")
    default_socket.touch()
    return default_socket


def test_rule1_unix_socket_argument_beats_everything(full_env: Path) -> None:
    client = connect("http://10.9.9.9:1", api_key=KEY, unix_socket="/arg.sock", retries=1)
    assert isinstance(client, CollimateClient)
    assert (client.unix_socket, client.retries) == ("/arg.sock", 1)


def test_rule2_api_key_argument_gives_the_gateway(full_env: Path) -> None:
    client = connect("https://gw.example/pfx", api_key=KEY, timeout=5)
    assert isinstance(client, GatewayClient)
    assert (client.api_key, client.base, client.timeout) == (KEY, "https://gw.example/pfx", 5.0)


def test_rule2_gateway_origin_falls_back_to_env(
    full_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLLIMATE_BASE_URL", "https://env-gw.example")
    client = connect(api_key=KEY)
    assert isinstance(client, GatewayClient) and client.base == "https://env-gw.example"
    monkeypatch.delenv("COLLIMATE_BASE_URL")
    assert connect(api_key=KEY).base == "https://api.collimate.ai"


def test_rule3_base_url_argument_gives_daemon_tcp(full_env: Path) -> None:
    client = connect("http://10.1.1.1:8080/")
    assert isinstance(client, CollimateClient)
    assert (client.base, client.unix_socket) == ("http://10.1.1.1:8080", None)


def test_rule4_env_socket_beats_an_ambient_key(full_env: Path) -> None:
    client = connect()
    assert isinstance(client, CollimateClient) and client.unix_socket == "/env/serve.sock"


def test_rule5_env_key_gives_the_gateway(full_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLLIMATE_SERVE_SOCKET")
    client = connect(retries=0)
    assert isinstance(client, GatewayClient)
    assert (client.api_key, client.tier, client.retries) == (ENV_KEY, "ent", 0)


def test_rule6_env_serve_url(full_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLLIMATE_SERVE_SOCKET")
    monkeypatch.delenv("COLLIMATE_API_KEY")
    client = connect()
    assert isinstance(client, CollimateClient) and client.base == "http://10.0.0.6:8080"


def test_rule7_default_socket_if_it_exists(default_socket: Path) -> None:
    default_socket.touch()
    client = connect()
    assert isinstance(client, CollimateClient) and client.unix_socket == str(default_socket)


def test_rule8_default_tcp(default_socket: Path) -> None:
    client = connect()
    assert isinstance(client, CollimateClient)
    assert (client.base, client.unix_socket) == ("http://127.0.0.1:8080", None)


def test_resolution_reports_the_rule(default_socket: Path) -> None:
    rules = [
        _env.resolve_transport(unix_socket="/s").rule,
        _env.resolve_transport(api_key=KEY).rule,
        _env.resolve_transport("http://h:1").rule,
        _env.resolve_transport(environ={"COLLIMATE_SERVE_SOCKET": "/s"}).rule,
        _env.resolve_transport(environ={"COLLIMATE_API_KEY": KEY}).rule,
        _env.resolve_transport(environ={"COLLIMATE_SERVE_URL": "http://h:1"}).rule,
        _env.resolve_transport(environ={}, default_socket=__file__).rule,
        _env.resolve_transport(environ={}).rule,
    ]
    assert rules == list(range(1, 9))


def test_connect_async_shares_the_order(full_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(connect_async(api_key=KEY), AsyncGatewayClient)
    client = connect_async()
    assert isinstance(client, AsyncCollimateClient) and client.unix_socket == "/env/serve.sock"
    monkeypatch.delenv("COLLIMATE_SERVE_SOCKET")
    assert isinstance(connect_async(), AsyncGatewayClient)


def test_from_env_skips_the_key(full_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert CollimateClient.from_env().unix_socket == "/env/serve.sock"
    monkeypatch.delenv("COLLIMATE_SERVE_SOCKET")
    client = CollimateClient.from_env(timeout=3)  # the API key is ignored here
    assert (client.base, client.timeout) == ("http://10.0.0.6:8080", 3.0)
    monkeypatch.delenv("COLLIMATE_SERVE_URL")
    assert CollimateClient.from_env().unix_socket == str(full_env)
    full_env.unlink()
    assert AsyncCollimateClient.from_env().base == "http://127.0.0.1:8080"


def test_for_node_socket() -> None:
    client = CollimateClient.for_node_socket()
    assert client.unix_socket == "/run/collimate-session/serve.sock"
    assert AsyncCollimateClient.for_node_socket("/x.sock", retries=0).retries == 0
