"""The ready spec: when a warm clone of a baked template counts as ready (``Ready``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Ready"]


@dataclass(frozen=True)
class Ready:
    """When a warm clone of a baked template counts as ready, and what it exposes.

    Attributes:
        cmd: a command that must succeed (``WARM_CMD``).
        http: a URL path polled until it answers (wins over ``cmd`` server-side).
        http_timeout_s: how long to poll ``http``.
        ports: guest ports to expose (imply a NIC).
        env: extra environment baked in.
        network: give the template a NIC (Pro/Ent).

    >>> Ready().to_wire() is None
    True
    >>> Ready(http="/healthz", network=True).to_wire()
    {'http': '/healthz', 'network': True}
    """

    cmd: str = ""
    http: str = ""
    http_timeout_s: int = 0
    ports: Sequence[int] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    network: bool = False

    def to_wire(self) -> dict[str, Any] | None:
        """The ReadySpec dict with empty fields omitted, or ``None`` if nothing is set."""
        spec: dict[str, Any] = {}
        if self.cmd:
            spec["cmd"] = self.cmd
        if self.http:
            spec["http"] = self.http
        if self.http_timeout_s:
            spec["http_timeout_s"] = int(self.http_timeout_s)
        if self.ports:
            spec["ports"] = [int(p) for p in self.ports]
        if self.env:
            spec["env"] = dict(self.env)
        if self.network:
            spec["network"] = True
        return spec or None

    def __bool__(self) -> bool:
        return self.to_wire() is not None
