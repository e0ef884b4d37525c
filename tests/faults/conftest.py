"""Fixtures for the fault tests: nodes each test owns (and may crash), counted HTTP attempts."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from collimate_rl.node.runtime._recovery import RECORD_NAME, claim_state_dir

from ._proc import NodeProcess


class CountingTransport(httpx.HTTPTransport):
    """The real unix-socket transport, counting every attempt by ``(method, path)``.

    Proves retry behaviour: an exec sent once was attempted once.
    """

    def __init__(self, uds: Path) -> None:
        super().__init__(uds=str(uds))
        self.sent: Counter[tuple[str, str]] = Counter()
        self.batched_execs = 0  # items of every /v1/exec/batch attempt

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent[(request.method, request.url.path)] += 1
        if request.url.path.endswith("/exec/batch"):
            self.batched_execs += len(json.loads(request.read())["items"])
        return super().handle_request(request)

    def execs(self) -> int:
        """Execs attempted: single exec posts plus the items of batch posts."""
        return self.posts("/exec") + self.batched_execs

    def posts(self, suffix: str) -> int:
        """POST attempts whose path ends with ``suffix``."""
        return sum(n for (m, path), n in self.sent.items() if m == "POST" and path.endswith(suffix))


@pytest.fixture
def make_node(tmp_path: Path) -> Iterator[Callable[..., NodeProcess]]:
    """``make_node(*serve_flags, name=...)``: a node process in ``tmp_path/name``, stopped at teardown."""
    made: list[NodeProcess] = []

    def make(*flags: str, name: str = "node", **kwargs: object) -> NodeProcess:
        workdir = tmp_path / name
        workdir.mkdir(exist_ok=True)
        node = NodeProcess(workdir, *flags, **kwargs)  # type: ignore[arg-type]
        made.append(node)
        return node

    yield make
    for node in made:
        node.stop()
        # A test that failed between a crash and the restart leaves the crashed run's
        # leftovers: recover them like a restart would, so no test run leaks.
        if (node.state / RECORD_NAME).exists():
            claim, _ = claim_state_dir(node.state)
            claim.release()
