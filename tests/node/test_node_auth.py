"""The optional node token (``serve --token-file``): 401 before anything runs, clients send it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest

from collimate_rl import connect
from collimate_rl.cli import main as cli_main
from collimate_rl.errors import CollimateAuthError, CollimateUsageError, GatewayError
from collimate_rl.node.server import main as serve_main
from collimate_rl.wire import AsyncCollimateClient, CollimateClient

from .conftest import ThreadedNode, python_template

TOKEN = "node-t0ken_" + "x" * 32
MakeNode = Callable[..., ThreadedNode]


@pytest.fixture
def guarded(node_factory: MakeNode, monkeypatch: pytest.MonkeyPatch) -> ThreadedNode:
    monkeypatch.delenv("COLLIMATE_SERVE_TOKEN", raising=False)
    return node_factory(token=TOKEN, pool_size=0)


def _sessions(node: ThreadedNode) -> int:
    return len(node.node.sessions)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        f"Basic {TOKEN}",
        f"Bearer {TOKEN[:-1]}y",  # same length, last character wrong
        f"Bearer {TOKEN}x",
        "Bearer  x",
    ],
)
def test_a_missing_or_wrong_token_is_401_and_nothing_runs(
    guarded: ThreadedNode, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    with guarded.client() as http:
        for method, path, body in [
            ("GET", "/v1/health", None),
            ("GET", "/v1/sessions", None),
            ("POST", "/v1/sessions", {"template_id": "python3"}),
            ("POST", "/v1/exec", {"template_id": "python3", "command": "touch /tmp/ran"}),
            ("POST", "/v1/exec", "{not json"),  # refused before the body is even parsed
            ("DELETE", "/v1/sessions/ses_x", None),
            ("GET", "/no/such/route", None),
        ]:
            content = body if isinstance(body, str) else None
            resp = http.request(
                method,
                path,
                headers=headers,
                json=body if not isinstance(body, str) else None,
                content=content,
            )
            assert resp.status_code == 401, (method, path, resp.text)
            assert resp.json()["error_code"] == "unauthorized"
            assert resp.headers["www-authenticate"].startswith("Bearer")
    assert _sessions(guarded) == 0
    assert guarded.node.admission.running == 0


def test_the_clients_send_the_token(guarded: ThreadedNode, monkeypatch: pytest.MonkeyPatch) -> None:
    with CollimateClient(guarded.base_url, token=TOKEN, retries=0) as client:
        template = python_template(client.templates())
        assert client.exec_once(template, command="echo ok")["stdout"] == "ok\n"
    with (
        pytest.raises(CollimateAuthError) as info,
        CollimateClient(guarded.base_url, retries=3, backoff=0.0) as client,
    ):
        client.health()
    err = info.value
    assert (err.status, err.error_code) == (401, "unauthorized")
    assert not isinstance(err, GatewayError)  # a node's error, not the gateway's
    # connect() passes token= through; the environment is the default.
    with connect(guarded.base_url, token=TOKEN) as client:
        assert client.health()["status"] == "ok"
    monkeypatch.setenv("COLLIMATE_SERVE_TOKEN", TOKEN)
    with CollimateClient(guarded.base_url) as client:
        assert client.health()["status"] == "ok"
    with (
        CollimateClient(guarded.base_url, token="wrong") as client,  # the argument wins
        pytest.raises(CollimateAuthError),
    ):
        client.health()

    async def run_async() -> str:
        async with AsyncCollimateClient(guarded.base_url) as aclient:
            out = await aclient.exec_once(template, command="echo async")
            return str(out["stdout"])

    assert anyio.run(run_async) == "async\n"


def test_token_arguments_are_checked() -> None:
    with pytest.raises(CollimateUsageError):
        CollimateClient("http://127.0.0.1:9", token="has a space")
    with pytest.raises(CollimateUsageError):
        connect("https://gw.example", api_key="col_pro_abcd1234_" + "s" * 32, token=TOKEN)


def _token_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_serve_refuses_a_bad_token_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--isolation", "none", "--port", "0", "--token-file"]
    assert serve_main([*common, str(_token_file(tmp_path, TOKEN, 0o644))]) == 2
    assert "readable by every user" in capsys.readouterr().err
    assert serve_main([*common, str(_token_file(tmp_path, "  \n"))]) == 2
    assert "printable ASCII" in capsys.readouterr().err
    assert serve_main([*common, str(tmp_path / "missing")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_the_cli_reads_a_token_file(
    guarded: ThreadedNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = _token_file(tmp_path, TOKEN + "\n")
    assert cli_main(["health", "--url", guarded.base_url, "--token-file", str(token_file)]) == 0
    capsys.readouterr()
    code = cli_main(["health", "--url", guarded.base_url])
    err = capsys.readouterr().err
    assert code != 0 and "--token-file" in err and "HTTP 401" in err


def test_a_unix_socket_node_may_require_it_too(node_factory: MakeNode) -> None:
    node = node_factory(uds=True, token=TOKEN, pool_size=0)
    transport = httpx.HTTPTransport(uds=str(node.uds_path))
    with httpx.Client(transport=transport, base_url="http://localhost") as http:
        assert http.get("/v1/health").status_code == 401
    assert node.uds_path is not None
    with CollimateClient(unix_socket=str(node.uds_path), token=TOKEN) as client:
        assert client.health()["status"] == "ok"
    assert os.stat(node.uds_path).st_mode & 0o007 == 0  # and the socket is not for others
