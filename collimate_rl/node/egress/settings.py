"""The operator's egress settings: name overrides, stand-in internet ranges, timeouts.

All defaults leave a production node as strict as it can be: names resolve
through the system resolver, and only globally routable addresses count as
the internet. The overrides exist for air-gapped mirrors and for tests, which
serve a stand-in internet on other loopback addresses (``127.0.0.2``, ...):

``collimate serve --egress-resolve pypi.test=127.0.0.2 --egress-internet 127.0.0.2/32
--egress-resolve-only``

* ``resolve``: a name (or ``*.`` wildcard) and the addresses the proxy uses
  for it, instead of asking DNS (like ``curl --resolve``).
* ``internet``: ranges treated as public (reachable under ``open``, a
  denylist, or an allowlist that names the host). The node's own listening
  sockets stay unreachable whatever this says.
* ``resolve_only``: never ask the system resolver; a name without an
  override cannot be reached (so a test leaks no DNS query).

>>> s = EgressSettings.from_flags(resolve=["pypi.test=127.0.0.2"], internet=["127.0.0.2/32"])
>>> s.lookup("PyPI.test"), s.is_internet(ip_address("127.0.0.2"))
((IPv4Address('127.0.0.2'),), True)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import ip_address, ip_network
from typing import Final

from collimate_rl.node.egress.entries import (
    IPAddress,
    IPNetwork,
    in_network,
    normalize_host,
    parse_address,
    unmapped,
)

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_MAX_CONNECTIONS", "EgressSettings"]

#: Seconds the proxy waits for an upstream TCP connect (then 504 / SOCKS "host unreachable").
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
#: Proxied connections one session may hold open at once.
DEFAULT_MAX_CONNECTIONS: Final = 256


@dataclass(frozen=True)
class EgressSettings:
    """How this node's proxy resolves names and what it treats as the internet.

    Attributes:
        resolve: normalized name (or ``*.suffix``) -> the addresses to use.
        internet: ranges that count as public even though they are not globally
            routable (a stand-in internet, an internal mirror).
        resolve_only: resolve only names in ``resolve``.
        connect_timeout: seconds to wait for an upstream connect.
        max_connections: proxied connections per session at once.
    """

    resolve: Mapping[str, tuple[IPAddress, ...]] = field(default_factory=dict)
    internet: tuple[IPNetwork, ...] = ()
    resolve_only: bool = False
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    @classmethod
    def from_flags(
        cls,
        *,
        resolve: Iterable[str] = (),
        internet: Iterable[str] = (),
        resolve_only: bool = False,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> EgressSettings:
        """Parse ``NAME=IP[,IP...]`` overrides and CIDR ranges; ``ValueError`` on a bad one.

        >>> EgressSettings.from_flags(resolve=["*.hub.test=127.0.0.3,::1"]).lookup("a.hub.test")
        (IPv4Address('127.0.0.3'), IPv6Address('::1'))
        """
        table: dict[str, tuple[IPAddress, ...]] = {}
        for item in resolve:
            name, sep, addresses = item.partition("=")
            name = normalize_host(name)
            bare = name[2:] if name.startswith("*.") else name
            if not sep or not bare or "*" in bare or parse_address(bare) is not None:
                raise ValueError(f"--egress-resolve {item!r}: expected NAME=IP[,IP...]")
            try:
                parsed = tuple(unmapped(ip_address(a.strip())) for a in addresses.split(","))
            except ValueError as exc:
                raise ValueError(f"--egress-resolve {item!r}: {exc}") from None
            table[name] = table.get(name, ()) + parsed
        try:
            ranges = tuple(ip_network(text.strip(), strict=True) for text in internet)
        except ValueError as exc:
            raise ValueError(f"--egress-internet: {exc}") from None
        if connect_timeout <= 0:
            raise ValueError("the egress connect timeout must be positive")
        return cls(
            resolve=table,
            internet=ranges,
            resolve_only=resolve_only,
            connect_timeout=connect_timeout,
        )

    @property
    def customized(self) -> bool:
        """Any override is set (the node logs it at start)."""
        return bool(self.resolve or self.internet or self.resolve_only)

    def lookup(self, host: str) -> tuple[IPAddress, ...] | None:
        """The override for ``host`` (exact name first, then the longest wildcard), or ``None``."""
        host = normalize_host(host)
        exact = self.resolve.get(host)
        if exact is not None:
            return exact
        labels = host.split(".")
        for i in range(1, len(labels)):
            found = self.resolve.get("*." + ".".join(labels[i:]))
            if found is not None:
                return found
        return None

    def is_internet(self, address: IPAddress) -> bool:
        """Whether ``address`` counts as the public internet.

        Globally routable addresses do (``ipaddress``'s ``is_global``, which
        excludes loopback, private, link-local, shared and reserved ranges), and
        so do the operator's ``internet`` ranges. Multicast never does.

        >>> EgressSettings().is_internet(ip_address("169.254.169.254"))
        False
        """
        address = unmapped(address)
        if address.is_multicast:
            return False
        if any(in_network(address, net) for net in self.internet):
            return True
        return address.is_global
