"""Fixtures: a real local node (bwrap when available) and a subprocess test double."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ._fake import SubprocessClient

TEMPLATE = "python3"


@pytest.fixture(scope="session")
def node() -> Iterator[Any]:
    """One real node for the session (``isolation="auto"``: bwrap on this Linux)."""
    from collimate_rl.node import LocalNode

    try:
        local = LocalNode(max_inflight=4)
        local.start()
    except Exception as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"the local node does not start here: {exc}")
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="session")
def client(node: Any) -> Any:
    return node.client()


@pytest.fixture
def fake() -> SubprocessClient:
    return SubprocessClient()
