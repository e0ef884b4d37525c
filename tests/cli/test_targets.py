"""Which node a command reaches: ``--url``/``--api-key`` (the gateway, faked), the environment,
or an embedded local node started for the command."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.cli._target import split_url
from collimate_rl.errors import CollimateUsageError

from . import _samples
from .conftest import Run

Cli = Callable[..., Run]
KEY = "col_pro_abcd1234_" + "s" * 32
EMBEDDED = "starting a local node for this command"


@pytest.fixture
def gateway() -> Iterator[tuple[Any, str]]:
    from sandbox._gateway import FakeGateway  # the suite's contract-faithful gateway fake

    fake = FakeGateway(KEY)
    server, url = fake.serve()
    try:
        yield fake, url
    finally:
        server.shutdown()
        server.server_close()
        fake.close()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("unix:/run/node.sock", ("/run/node.sock", None)),
        ("unix:///run/node.sock", ("/run/node.sock", None)),
        ("/run/node.sock", ("/run/node.sock", None)),
        ("http://127.0.0.1:8080", (None, "http://127.0.0.1:8080")),
        ("https://gw.example", (None, "https://gw.example")),
    ],
)
def test_split_url(url: str, expected: tuple[str | None, str | None]) -> None:
    assert split_url(url) == expected


@pytest.mark.parametrize("url", ["ftp://x", "127.0.0.1:8080", "unix:"])
def test_split_url_rejects(url: str) -> None:
    with pytest.raises(CollimateUsageError):
        split_url(url)


def test_exec_and_sessions_through_the_gateway(cli: Cli, gateway: tuple[Any, str]) -> None:
    fake, url = gateway
    run = cli("exec", "echo over the gateway", "--url", url, "--api-key", KEY)
    assert (run.code, run.out) == (0, "over the gateway\n")
    assert EMBEDDED not in run.err
    assert any(path.endswith("/exec") for _, path, _ in fake.calls)
    assert fake.shell.list_sessions() == []  # the sandbox was deleted after the exec
    assert cli("sessions", "--json", "--url", url, "--api-key", KEY).json() == {"sessions": []}
    sid = fake.shell.create_session("python3")["session_id"]
    listed = cli("sessions", "--json", "--url", url, "--api-key", KEY).json()["sessions"]
    assert [(s["session_id"], s["template_id"]) for s in listed] == [(sid, "python3")]
    reaped = cli("sessions", "--reap", "--json", "--url", url, "--api-key", KEY)
    assert reaped.code == 0 and reaped.json()["sessions"][0]["deleted"] is True
    assert fake.shell.list_sessions() == []


def test_gateway_from_the_environment(
    cli: Cli, gateway: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = gateway
    monkeypatch.setenv("COLLIMATE_API_KEY", KEY)
    monkeypatch.setenv("COLLIMATE_BASE_URL", url)
    run = cli("exec", "--code", "print('env')")
    assert (run.code, run.out) == (0, "env\n")
    assert EMBEDDED not in run.err and fake.calls


def test_bake_is_refused_on_the_gateway(cli: Cli, gateway: tuple[Any, str]) -> None:
    _, url = gateway
    run = cli("bake", "x", "--setup", "true", "--url", url, "--api-key", KEY)
    assert run.code == 2 and "Template.bake" in run.err


def test_api_key_with_a_socket_is_a_usage_error(cli: Cli) -> None:
    run = cli("health", "--url", "unix:/run/x.sock", "--api-key", KEY)
    assert run.code == 2 and "--api-key" in run.err


def test_node_socket_from_the_environment(
    cli: Cli, local_node: Any, local_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = local_client.create_session("python3")["session_id"]
    try:
        monkeypatch.setenv("COLLIMATE_SERVE_SOCKET", str(local_node.socket_path))
        run = cli("sessions", "--json")
        assert sid in {s["session_id"] for s in run.json()["sessions"]}
        assert EMBEDDED not in run.err
    finally:
        local_client.delete_session(sid)


def test_a_bake_warns_of_its_lifetime_only_on_an_embedded_node(
    cli: Cli, local_node: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLLIMATE_SERVE_SOCKET", str(local_node.socket_path))
    run = cli("bake", f"cli-env-{secrets.token_hex(4)}", "--setup", "true")
    assert run.code == 0 and "lives only as long" not in run.err  # the node outlives the command
    monkeypatch.delenv("COLLIMATE_SERVE_SOCKET")
    run = cli("bake", "cli-embedded", "--setup", "true")
    assert run.code == 0 and EMBEDDED in run.err and "lives only as long" in run.err


def test_embedded_node_by_default(cli: Cli) -> None:
    from collimate_rl.node import local

    live = set(local._LIVE)
    run = cli("exec", "--code", "print('embedded')")
    assert (run.code, run.out) == (0, "embedded\n")
    assert EMBEDDED in run.err
    quiet = cli("health", "--json")  # --json keeps stderr free of status lines
    assert quiet.code == 0 and quiet.err == "" and quiet.json()["status"] == "ok"
    assert set(local._LIVE) == live  # each command stopped the node it started


def test_embedded_node_starts_only_when_needed(cli: Cli, node_url: str, tmp_path: Path) -> None:
    samples = _samples.write(tmp_path / "samples.jsonl", _samples.rows(((1, 1),)))
    assert cli("eval", str(samples), "--task-set", "collimate-basic", "--url", node_url).code == 0
    run = cli("eval", str(samples), "--task-set", "collimate-basic")  # everything is graded
    assert run.code == 0 and "2 from the output file" in run.out
    assert EMBEDDED not in run.err
