"""Per-session egress counters, per host: allowed, denied, failed, bytes each way.

``GET /v1/sessions/{id}`` reports them under ``egress``. A session choosing
host names cannot grow the table without bound: past :data:`MAX_HOSTS`
distinct hosts, the rest are counted under :data:`OTHER_HOSTS`.

>>> stats = EgressStats()
>>> stats.host("pypi.org").allowed += 1
>>> stats.host("pypi.org").bytes_in += 512
>>> stats.to_wire()["hosts"]["pypi.org"]
{'allowed': 1, 'denied': 0, 'failed': 0, 'bytes_out': 0, 'bytes_in': 512}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["MAX_HOSTS", "OTHER_HOSTS", "EgressStats", "HostCounters"]

#: Distinct hosts counted separately per session.
MAX_HOSTS: Final = 512
#: The key the hosts past :data:`MAX_HOSTS` share.
OTHER_HOSTS: Final = "(other hosts)"


@dataclass
class HostCounters:
    """One host's counters.

    Attributes:
        allowed: connections the policy let through (and that connected).
        denied: requests the policy refused.
        failed: allowed requests that could not be resolved or connected.
        bytes_out: bytes sent from the session to the host.
        bytes_in: bytes received from the host.
    """

    allowed: int = 0
    denied: int = 0
    failed: int = 0
    bytes_out: int = 0
    bytes_in: int = 0

    def add_out(self, n: int) -> None:
        self.bytes_out += n

    def add_in(self, n: int) -> None:
        self.bytes_in += n


class EgressStats:
    """The counters of one session (single event loop: no locking)."""

    def __init__(self) -> None:
        self.hosts: dict[str, HostCounters] = {}

    def host(self, name: str) -> HostCounters:
        """The counters of ``name`` (created on first use)."""
        counters = self.hosts.get(name)
        if counters is None:
            if len(self.hosts) >= MAX_HOSTS:
                name = OTHER_HOSTS
            counters = self.hosts.setdefault(name, HostCounters())
        return counters

    def to_wire(self) -> dict[str, Any]:
        """Totals plus ``hosts``: ``{host: {allowed, denied, failed, bytes_out, bytes_in}}``."""
        hosts = {name: dataclasses.asdict(c) for name, c in sorted(self.hosts.items())}
        totals = {
            key: sum(c[key] for c in hosts.values())
            for key in ("allowed", "denied", "failed", "bytes_out", "bytes_in")
        }
        return {**totals, "hosts": hosts}
