"""Suite-wide fixtures: one real local node (default isolation) shared by the upper layers' tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def local_node() -> Iterator[Any]:
    """A real local node (subprocess, unix socket, default isolation) for the whole session."""
    from collimate_rl.node import LocalNode

    with LocalNode() as node:
        yield node


@pytest.fixture(scope="session")
def local_client(local_node: Any) -> Iterator[Any]:
    """A ``CollimateClient`` connected to :func:`local_node`."""
    client = local_node.client()
    try:
        yield client
    finally:
        client.close()
