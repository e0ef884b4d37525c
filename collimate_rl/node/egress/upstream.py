"""Opening a checked upstream connection: decide, resolve, check the addresses, connect.

Both proxy protocols (``http_proxy``, ``socks``) go through
:meth:`Opener.open`, so the policy is applied in one place and every request
is counted once. The connection goes to an address that passed the checks,
never to the name again.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

from collimate_rl.node.egress.accounting import EgressStats, HostCounters
from collimate_rl.node.egress.decide import Refused, Target, allowed_addresses, check_target
from collimate_rl.node.egress.entries import IPAddress, parse_address, unmapped
from collimate_rl.node.egress.node_sockets import listening_here
from collimate_rl.node.egress.policy import EgressPolicy
from collimate_rl.node.egress.settings import EgressSettings

__all__ = ["Opener", "Upstream", "UpstreamError"]

#: SOCKS5 reply codes (RFC 1928) for the failures below.
SOCKS_NETWORK_UNREACHABLE = 3
SOCKS_HOST_UNREACHABLE = 4
SOCKS_CONNECTION_REFUSED = 5


class UpstreamError(Exception):
    """An allowed request could not be served: no such name, refused, unreachable, timed out.

    Attributes:
        timed_out: the connect timed out (HTTP 504 rather than 502).
        socks_reply: the SOCKS5 reply code for it.
    """

    def __init__(self, message: str, *, timed_out: bool = False, socks_reply: int = 4) -> None:
        super().__init__(message)
        self.timed_out = timed_out
        self.socks_reply = socks_reply


@dataclass
class Upstream:
    """A connected upstream and the counters its bytes go to."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    address: IPAddress
    counters: HostCounters


def _ignore(decision: str, reason: str) -> None:
    pass


class Opener:
    """Opens upstream connections for one session under its policy.

    Args:
        policy: the session's policy.
        settings: the node's egress settings.
        stats: the session's counters.
        is_node: whether an address and port is one of the node's own sockets.
        on_decision: told ``(decision, reason)`` for every request: ``allowed``,
            ``denied`` with :attr:`Refused.kind`, or ``failed`` with ``resolve`` or
            ``connect`` (the node's metrics).
    """

    def __init__(
        self,
        policy: EgressPolicy,
        settings: EgressSettings,
        stats: EgressStats,
        *,
        is_node: Callable[[IPAddress, int], bool] = listening_here,
        on_decision: Callable[[str, str], None] | None = None,
    ) -> None:
        self.policy = policy
        self.settings = settings
        self.stats = stats
        self.is_node = is_node
        self.on_decision = on_decision or _ignore

    async def open(self, target: Target) -> Upstream:
        """Connect to ``target``; raises :class:`Refused` or :class:`UpstreamError`."""
        counters = self.stats.host(target.host)
        try:
            name_allowed = check_target(self.policy, target)
            if target.address is not None:
                addresses: list[IPAddress] = [target.address]
            else:
                try:
                    addresses = await self._resolve(target, counters)
                except UpstreamError:
                    self.on_decision("failed", "resolve")
                    raise
            usable = allowed_addresses(
                self.policy,
                target,
                addresses,
                self.settings,
                name_allowed=name_allowed,
                is_node=self.is_node,
            )
        except Refused as exc:
            counters.denied += 1
            self.on_decision("denied", exc.kind)
            raise
        try:
            reader, writer, address = await self._connect(target, usable)
        except UpstreamError:
            counters.failed += 1
            self.on_decision("failed", "connect")
            raise
        counters.allowed += 1
        self.on_decision("allowed", "policy")
        return Upstream(reader, writer, address, counters)

    async def _resolve(self, target: Target, counters: HostCounters) -> list[IPAddress]:
        override = self.settings.lookup(target.host)
        if override is not None:
            return list(override)
        if self.settings.resolve_only:
            counters.failed += 1
            raise UpstreamError(
                f"cannot resolve {target.host}: this node resolves only the names the "
                "operator listed (--egress-resolve)",
                socks_reply=SOCKS_HOST_UNREACHABLE,
            )
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM),
                self.settings.connect_timeout,
            )
        except (OSError, asyncio.TimeoutError) as exc:
            counters.failed += 1
            raise UpstreamError(
                f"cannot resolve {target.host}: {exc or 'timed out'}",
                socks_reply=SOCKS_HOST_UNREACHABLE,
            ) from exc
        found: list[IPAddress] = []
        for info in infos:
            address = parse_address(str(info[4][0]).split("%", 1)[0])
            if address is not None:
                found.append(unmapped(address))
        return found

    async def _connect(
        self, target: Target, addresses: list[IPAddress]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, IPAddress]:
        last: UpstreamError | None = None
        for address in addresses:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(str(address), target.port),
                    self.settings.connect_timeout,
                )
            except asyncio.TimeoutError:
                last = UpstreamError(
                    f"connecting to {target.label} ({address}) timed out",
                    timed_out=True,
                    socks_reply=SOCKS_HOST_UNREACHABLE,
                )
            except OSError as exc:
                code = {
                    errno.ECONNREFUSED: SOCKS_CONNECTION_REFUSED,
                    errno.ENETUNREACH: SOCKS_NETWORK_UNREACHABLE,
                }.get(exc.errno or 0, SOCKS_HOST_UNREACHABLE)
                reason = os.strerror(exc.errno) if exc.errno else str(exc)
                last = UpstreamError(
                    f"connecting to {target.label} ({address}) failed: {reason}", socks_reply=code
                )
            else:
                return reader, writer, address
        raise last or UpstreamError(f"{target.label} has no address to connect to")
