"""Entries of an egress allow- or denylist: host names, ``*.`` wildcards, ``host:port``, IPs, CIDRs.

An entry is parsed once, at the node's boundary, into an :class:`Entry`; a
malformed one raises ``ValueError`` with a message that says what is wrong.
Matching is on the normalized form: lower case, no trailing dot.

=====================  ==========================================================
``pypi.org``           that host, any port
``*.github.com``       any name under ``github.com`` (not ``github.com`` itself)
``pypi.org:443``       that host, port 443 only (``*.x.org:443`` works too)
``10.20.0.5``          that address (``[2001:db8::1]:443`` for IPv6 with a port)
``10.20.0.0/16``       that network (strict: no host bits set)
=====================  ==========================================================

>>> parse_entry("PyPI.org.").text, parse_entry("*.github.com:443").port
('pypi.org', 443)
>>> parse_entry("10.20.0.0/16").matches_address(ip_address("10.20.3.4"), 80)
True
>>> parse_entry("*.github.com").matches_name("api.github.com", 443)
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Final, Literal

__all__ = [
    "MAX_ENTRY_CHARS",
    "Entry",
    "IPAddress",
    "IPNetwork",
    "in_network",
    "normalize_host",
    "parse_address",
    "parse_entry",
    "unmapped",
]

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network

#: Longest entry accepted (a DNS name is at most 253 characters, plus a port).
MAX_ENTRY_CHARS: Final = 300

_LABEL: Final = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_BRACKETED: Final = re.compile(r"\[([0-9a-f:.]+)\](?::([0-9]+))?")


@dataclass(frozen=True)
class Entry:
    """One parsed entry.

    Attributes:
        text: the canonical spelling (what the node echoes back).
        kind: ``"host"`` (an exact name), ``"suffix"`` (a ``*.`` wildcard) or
            ``"net"`` (an IP address or network).
        name: the host name or the wildcard's suffix (``""`` for ``net``).
        network: the network (``None`` unless ``kind == "net"``).
        port: the only port it covers, or ``None`` for every port.
    """

    text: str
    kind: Literal["host", "suffix", "net"]
    name: str = ""
    network: IPNetwork | None = None
    port: int | None = None

    def _port_ok(self, port: int) -> bool:
        return self.port is None or self.port == port

    def matches_name(self, host: str, port: int) -> bool:
        """Whether a request for the (normalized) host name ``host:port`` falls under this entry."""
        if not self._port_ok(port):
            return False
        if self.kind == "host":
            return host == self.name
        if self.kind == "suffix":
            return host.endswith("." + self.name)
        return False

    def matches_address(self, address: IPAddress, port: int) -> bool:
        """Whether ``address:port`` falls under this entry (only ``net`` entries name addresses)."""
        if self.network is None or not self._port_ok(port):
            return False
        return in_network(address, self.network)


def unmapped(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address (``::ffff:a.b.c.d``) as the IPv4 address it carries.

    >>> str(unmapped(ip_address("::ffff:127.0.0.1")))
    '127.0.0.1'
    """
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def in_network(address: IPAddress, network: IPNetwork) -> bool:
    """``address in network``, an IPv4 address and its IPv4-mapped IPv6 form alike.

    >>> in_network(ip_address("10.1.2.3"), ip_network("::ffff:10.0.0.0/104"))
    True
    """
    address = unmapped(address)
    if address.version != network.version:
        if address.version != 4:
            return False
        address = IPv6Address(f"::ffff:{address}")
    return address in network


def parse_address(text: str) -> IPAddress | None:
    """``text`` as an IP address (IPv6 with or without brackets), or ``None``.

    >>> parse_address("[::1]"), parse_address("pypi.org")
    (IPv6Address('::1'), None)
    """
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ip_address(text)
    except ValueError:
        return None


def _port(text: str, raw: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"{raw!r}: the port must be a number from 1 to 65535")
    return int(text)


def normalize_host(host: str) -> str:
    """A host name as entries match it: lower case, without a trailing dot.

    >>> normalize_host("API.GitHub.com.")
    'api.github.com'
    """
    host = host.strip().lower()
    return host[:-1] if host.endswith(".") else host


def _check_name(name: str, raw: str) -> None:
    if not name.isascii():
        raise ValueError(f"{raw!r}: write an internationalized name in its punycode (xn--) form")
    if len(name) > 253:
        raise ValueError(f"{raw!r}: a host name has at most 253 characters")
    for label in name.split("."):
        if "*" in label:
            raise ValueError(f"{raw!r}: a wildcard may only be a leading '*.'")
        if not _LABEL.fullmatch(label):
            raise ValueError(
                f"{raw!r}: not a host name, '*.' wildcard, host:port, IP address or CIDR"
            )


def _name_entry(text: str, port: int | None, raw: str) -> Entry:
    name = normalize_host(text)
    canonical_port = f":{port}" if port is not None else ""
    if name in ("*", ""):
        raise ValueError(f"{raw!r}: a bare wildcard names every host; use mode 'open' instead")
    if name.startswith("*."):
        suffix = name[2:]
        _check_name(suffix, raw)
        return Entry(f"*.{suffix}{canonical_port}", "suffix", name=suffix, port=port)
    _check_name(name, raw)
    address = parse_address(name)
    if address is not None:  # an IPv4 literal given with a port
        return _net_entry(ip_network(address), port)
    return Entry(f"{name}{canonical_port}", "host", name=name, port=port)


def _net_entry(network: IPNetwork, port: int | None) -> Entry:
    single = network.num_addresses == 1
    text = str(network.network_address) if single else str(network)
    if port is not None:
        text = f"[{text}]:{port}" if network.version == 6 else f"{text}:{port}"
    return Entry(text, "net", network=network, port=port)


def parse_entry(raw: str) -> Entry:
    """Parse one allow/deny entry; ``ValueError`` says what is wrong with a bad one.

    >>> parse_entry("[2001:db8::1]:443").text
    '[2001:db8::1]:443'
    >>> parse_entry("10.0.0.1/8")
    Traceback (most recent call last):
    ...
    ValueError: '10.0.0.1/8' is not a valid CIDR: host bits set (did you mean 10.0.0.0/8?)
    """
    if not isinstance(raw, str):
        raise ValueError(f"{raw!r}: an entry is a string")
    text = raw.strip().lower()
    if not text:
        raise ValueError("an entry may not be empty")
    if len(text) > MAX_ENTRY_CHARS:
        raise ValueError(f"an entry has at most {MAX_ENTRY_CHARS} characters")
    bracketed = _BRACKETED.fullmatch(text)
    if bracketed is not None:
        address = parse_address(bracketed.group(1))
        if not isinstance(address, IPv6Address):
            raise ValueError(f"{raw!r}: only an IPv6 address goes in brackets")
        port = _port(bracketed.group(2), raw) if bracketed.group(2) is not None else None
        return _net_entry(ip_network(address), port)
    if "/" in text:
        try:
            return _net_entry(ip_network(text, strict=True), None)
        except ValueError:
            pass
        try:
            loose = ip_network(text, strict=False)
        except ValueError:
            raise ValueError(
                f"{raw!r} is not a valid CIDR (an address/prefix, e.g. 10.20.0.0/16)"
            ) from None
        raise ValueError(f"{raw!r} is not a valid CIDR: host bits set (did you mean {loose}?)")
    address = parse_address(text)
    if address is not None:
        return _net_entry(ip_network(address), None)
    if text.count(":") == 1:
        host, _, port_text = text.partition(":")
        return _name_entry(host, _port(port_text, raw), raw)
    if ":" in text:
        raise ValueError(f"{raw!r}: write an IPv6 address with a port as [address]:port")
    return _name_entry(text, None, raw)
