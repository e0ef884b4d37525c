"""Fixtures for the wire tests: scripted servers (TCP and unix socket) and clients."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from collimate_rl.wire import CollimateClient

from ._server import ScriptedServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["tcp", "uds"])
def server(request: pytest.FixtureRequest) -> Iterator[ScriptedServer]:
    """A scripted daemon over TCP and over a unix socket."""
    srv = ScriptedServer(request.param).start()
    yield srv
    srv.stop()


@pytest.fixture
def tcp_server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer("tcp").start()
    yield srv
    srv.stop()


@pytest.fixture
def sleeps() -> list[float]:
    """Records the backoff sleeps of clients built by ``make_client`` (nothing really sleeps)."""
    return []


@pytest.fixture
def make_client(sleeps: list[float]) -> Iterator[Callable[..., CollimateClient]]:
    """Build a daemon client that records its sleeps instead of sleeping."""
    made: list[CollimateClient] = []

    def make(srv: ScriptedServer | None = None, **kw: Any) -> CollimateClient:
        kw.setdefault("sleep", sleeps.append)
        kw.setdefault("rng", random.Random(7))
        if srv is not None:
            kw = {**srv.client_kwargs, **kw}
        client = CollimateClient(**kw)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
