"""Fixtures: the REAL local node (a ``LocalNode`` subprocess) and the shell double.

``client`` runs a test twice: on the real node (skipped, with the reason, when
the node cannot start on this machine) and on :class:`ShellClient`, a
daemon-shaped double that runs ``sh`` in temp dirs (protocol logic only).
``COLLIMATE_TEST_NODE=off`` skips the node runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from collimate_rl.sandbox._shell import AsyncShellClient, ShellClient

_NODE_STATE: dict[str, Any] = {}


def _node() -> Any:
    """Start one LocalNode for the whole session (or remember why it could not start)."""
    if "node" in _NODE_STATE or "error" in _NODE_STATE:
        return _NODE_STATE.get("node")
    if os.environ.get("COLLIMATE_TEST_NODE") == "off":
        _NODE_STATE["error"] = "COLLIMATE_TEST_NODE=off"
        return None
    try:
        from collimate_rl.node import LocalNode

        node = LocalNode()
        node.start()
        client = node.client()
        sid = client.create_session("python3")["session_id"]
        client.delete_session(sid)
    except Exception as exc:
        last = [line for line in str(exc).splitlines() if line.strip()][-1:] or [repr(exc)]
        _NODE_STATE["error"] = f"the local node cannot start here: {last[0][:300]}"
        return None
    _NODE_STATE["node"] = node
    return node


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    node = _NODE_STATE.pop("node", None)
    if node is not None:
        node.stop()


def node_or_skip() -> Any:
    node = _node()
    if node is None:
        pytest.skip(_NODE_STATE["error"])
    return node


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def shell_client() -> Iterator[ShellClient]:
    client = ShellClient()
    yield client
    client.close()


@pytest.fixture
def node_client() -> Any:
    return node_or_skip().client()


@pytest.fixture(params=["node", "shell"])
def client(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "node":
        yield node_or_skip().client()
    else:
        shell = ShellClient()
        yield shell
        shell.close()


@pytest.fixture(params=["node", "shell"])
def async_client(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "node":
        from collimate_rl.wire import AsyncCollimateClient

        node = node_or_skip()
        if node.socket_path is not None:
            yield AsyncCollimateClient(unix_socket=str(node.socket_path))
        else:
            yield AsyncCollimateClient(base_url=node.base_url)
    else:
        shell = AsyncShellClient()
        yield shell
        shell.sync.close()
