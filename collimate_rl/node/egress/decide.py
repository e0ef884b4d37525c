"""The decision: may this session reach ``host:port``, and at which addresses?

Two steps, so that a refusal by name costs no DNS query and a name that
resolves somewhere it must not go is caught after resolution:

1. :func:`check_target` on the requested name or IP literal (``none``
   refuses all; an allowlist must name it, a denylist must not).
2. :func:`allowed_addresses` on the addresses the proxy resolved (or the
   literal). Each address is checked, and the proxy connects only to one that
   passed, never to the name again (no DNS rebinding between check and use):

   * the node's own listening sockets: never, whatever the policy says;
   * an address that is not the public internet (loopback, private,
     link-local such as ``169.254.169.254``, shared, reserved, multicast):
     only when an allowlist names it by IP or CIDR;
   * an allowlist's address entries and a denylist's address entries apply
     to resolved addresses too.

>>> from ipaddress import ip_address
>>> from collimate_rl.node.egress.policy import OPEN, EgressPolicy
>>> from collimate_rl.node.egress.settings import EgressSettings
>>> deny = EgressPolicy.model_validate({"preset": "rl-leakage"})
>>> check_target(deny, Target.parse("api.github.com", 443))
Traceback (most recent call last):
...
collimate_rl.node.egress.decide.Refused: api.github.com:443 refused by egress policy denylist (preset rl-leakage): it matches the deny entry '*.github.com'
>>> allowed_addresses(OPEN, Target.parse("db.test", 5432), [ip_address("10.0.0.5")], EgressSettings())
Traceback (most recent call last):
...
collimate_rl.node.egress.decide.Refused: db.test:5432 refused by egress policy open: it resolves to 10.0.0.5, a private address (reachable only when an allowlist names it by IP or CIDR)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collimate_rl.node.egress.entries import IPAddress, normalize_host, parse_address, unmapped
from collimate_rl.node.egress.node_sockets import listening_here
from collimate_rl.node.egress.policy import EgressPolicy
from collimate_rl.node.egress.settings import EgressSettings

__all__ = ["Refused", "Target", "address_kind", "allowed_addresses", "check_target"]


@dataclass(frozen=True)
class Target:
    """What a request asks for: a normalized host name or an IP literal, and a port.

    >>> Target.parse("[::1]", 443).address, Target.parse("PyPI.org.", 80).label
    (IPv6Address('::1'), 'pypi.org:80')
    """

    host: str
    port: int
    address: IPAddress | None = None

    @classmethod
    def parse(cls, host: str, port: int) -> Target:
        """``ValueError`` for an empty host or a port outside 1-65535."""
        if not 1 <= port <= 65535:
            raise ValueError(f"port {port} is outside 1-65535")
        address = parse_address(host.strip())
        if address is not None:
            address = unmapped(address)
            return cls(str(address), port, address)
        name = normalize_host(host)
        if not name or not name.isascii() or not name.isprintable() or len(name) > 253:
            raise ValueError(f"{host!r} is not a host name")
        if any(c.isspace() or c in "/@[]\\%" for c in name):
            raise ValueError(f"{host!r} is not a host name")
        return cls(name, port, None)

    @property
    def label(self) -> str:
        """``host:port`` (``[v6]:port``): the key refusals and counters use."""
        host = (
            f"[{self.host}]"
            if self.address is not None and self.address.version == 6
            else self.host
        )
        return f"{host}:{self.port}"


class Refused(Exception):
    """The policy refuses the request; the message names the target, the policy and why.

    ``kind`` is the reason in one word from a fixed set (the node's metrics label):
    ``no_egress``, ``deny_entry``, ``not_allowed``, ``node_socket``, ``non_public``,
    ``no_address``.
    """

    def __init__(self, target: Target, policy: EgressPolicy, reason: str, kind: str) -> None:
        self.target = target
        self.policy = policy
        self.reason = reason
        self.kind = kind
        super().__init__(f"{target.label} refused by egress policy {policy.describe()}: {reason}")


def address_kind(address: IPAddress) -> str:
    """Why an address is not the public internet, in a word or two.

    >>> from ipaddress import ip_address
    >>> address_kind(ip_address("169.254.169.254")), address_kind(ip_address("127.0.0.1"))
    ('link-local', 'loopback')
    """
    address = unmapped(address)
    for kind, flag in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("unspecified", address.is_unspecified),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if flag:
            return kind
    return "non-public"


def check_target(policy: EgressPolicy, target: Target) -> bool:
    """Refuse by name or literal before anything is resolved; raises :class:`Refused`.

    Returns whether an allowlist named the host itself (then every public
    address it resolves to may be used).
    """
    if policy.mode == "none":
        raise Refused(target, policy, "this session has no egress", "no_egress")
    if policy.mode == "denylist":
        for entry in policy.deny_rules:
            if (target.address is None and entry.matches_name(target.host, target.port)) or (
                target.address is not None and entry.matches_address(target.address, target.port)
            ):
                raise Refused(
                    target, policy, f"it matches the deny entry {entry.text!r}", "deny_entry"
                )
        return False
    if policy.mode == "allowlist":
        if target.address is not None:
            if any(e.matches_address(target.address, target.port) for e in policy.allow_rules):
                return False
            raise Refused(target, policy, "no allow entry names it", "not_allowed")
        if any(e.matches_name(target.host, target.port) for e in policy.allow_rules):
            return True
        if not any(e.kind == "net" for e in policy.allow_rules):
            raise Refused(target, policy, "no allow entry names it", "not_allowed")
    return False


def _address_refusal(
    policy: EgressPolicy,
    target: Target,
    address: IPAddress,
    settings: EgressSettings,
    name_allowed: bool,
    is_node: Callable[[IPAddress, int], bool],
) -> tuple[str, str] | None:
    """Why ``address`` may not be used, and that reason's :attr:`Refused.kind`; or ``None``."""
    port = target.port
    shown = "it is" if target.address is not None else f"it resolves to {address}, which is"
    if is_node(address, port):
        return f"{shown} this node's own listening socket (never reachable)", "node_socket"
    named = any(e.matches_address(address, port) for e in policy.allow_rules)
    if policy.mode == "allowlist" and not (name_allowed or named):
        return f"{shown} not named by any allow entry", "not_allowed"
    for entry in policy.deny_rules:
        if entry.matches_address(address, port):
            return f"{shown} in the deny entry {entry.text!r}", "deny_entry"
    if not named and not settings.is_internet(address):
        where = "it is" if target.address is not None else f"it resolves to {address},"
        return (
            f"{where} a {address_kind(address)} address "
            "(reachable only when an allowlist names it by IP or CIDR)",
            "non_public",
        )
    return None


def allowed_addresses(
    policy: EgressPolicy,
    target: Target,
    addresses: Sequence[IPAddress],
    settings: EgressSettings,
    *,
    name_allowed: bool = False,
    is_node: Callable[[IPAddress, int], bool] = listening_here,
) -> list[IPAddress]:
    """The addresses of ``target`` the session may connect to, in order; raises :class:`Refused`.

    Args:
        addresses: the literal, or what the name resolved to.
        name_allowed: :func:`check_target`'s answer.
        is_node: whether an address and port is one of the node's own sockets.
    """
    ok: list[IPAddress] = []
    first: tuple[str, str] | None = None
    for address in dict.fromkeys(unmapped(a) for a in addresses):
        reason = _address_refusal(policy, target, address, settings, name_allowed, is_node)
        if reason is None:
            ok.append(address)
        elif first is None:
            first = reason
    if not ok:
        text, kind = first or ("it resolves to no address", "no_address")
        raise Refused(target, policy, text, kind)
    return ok
