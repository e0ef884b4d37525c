"""CLI test fixtures: run ``collimate`` in-process, address the shared local node by URL."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from collimate_rl.cli import main

_TARGET_ENV = (
    "COLLIMATE_SERVE_SOCKET",
    "COLLIMATE_API_KEY",
    "COLLIMATE_SERVE_URL",
    "COLLIMATE_SERVE_TOKEN",
)


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture(autouse=True)
def _no_target_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests choose the node explicitly; a developer's $COLLIMATE_* must not leak in."""
    for name in _TARGET_ENV:
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    """``cli("health", "--json")`` runs ``collimate`` in this process."""

    def run(*argv: str) -> Run:
        code = main(list(argv))
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def node_url(local_node: Any) -> str:
    """``--url`` for the shared local node (it listens on a unix socket)."""
    return f"unix:{local_node.socket_path}"
