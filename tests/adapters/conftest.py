"""Adapter tests run against the suite's real local node and leave no sessions behind."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def socket_path(local_node: Any) -> str:
    """The local node's unix socket, as adapter config takes it."""
    return str(local_node.socket_path)


@pytest.fixture(scope="module", autouse=True)
def _no_session_leaks(local_client: Any) -> Iterator[None]:
    before = {s["session_id"] for s in local_client.list_sessions()}
    yield
    after = {s["session_id"] for s in local_client.list_sessions()}
    assert after <= before, f"sessions leaked: {sorted(after - before)}"


ADD_GT = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
HALF = "```python\ndef add(a, b):\n    return a * b if a == 2 else a + b + (a < 0)\n```"
BAD = "```python\ndef add(a, b):\n    return a - b\n```"
