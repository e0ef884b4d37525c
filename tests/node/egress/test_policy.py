"""The egress policy model, its entries, the preset and the decision (no network)."""

from __future__ import annotations

from ipaddress import ip_address, ip_network
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from collimate_rl.node.egress import NONE, OPEN, PRESETS, EgressPolicy, parse_entry, preset_entries
from collimate_rl.node.egress.decide import Refused, Target, allowed_addresses, check_target
from collimate_rl.node.egress.settings import EgressSettings


def policy(raw: object) -> EgressPolicy:
    return EgressPolicy.model_validate(raw)


def error_of(raw: object) -> tuple[tuple[object, ...], str]:
    with pytest.raises(ValidationError) as info:
        policy(raw)
    first = info.value.errors()[0]
    return tuple(first["loc"]), str(first["msg"])


@pytest.mark.parametrize(
    ("raw", "wire"),
    [
        ({"mode": "open"}, {"mode": "open"}),
        ({"mode": "none"}, {"mode": "none"}),
        (
            {"allow": ["PyPI.org.", "10.20.0.0/16"]},
            {"mode": "allowlist", "allow": ["pypi.org", "10.20.0.0/16"]},
        ),
        ({"mode": "allowlist", "allow": []}, {"mode": "allowlist", "allow": []}),
        ({"deny": ["*.X.com:22"]}, {"mode": "denylist", "deny": ["*.x.com:22"]}),
        ({"preset": "rl-leakage"}, {"mode": "denylist", "preset": "rl-leakage"}),
        (
            {"mode": "denylist", "deny": ["a.b"], "preset": "rl-leakage"},
            {"mode": "denylist", "deny": ["a.b"], "preset": "rl-leakage"},
        ),
        (
            {"allow": ["[2001:DB8::1]:443", "::1", "1.2.3.4:80"]},
            {"mode": "allowlist", "allow": ["[2001:db8::1]:443", "::1", "1.2.3.4:80"]},
        ),
    ],
)
def test_the_contract_shapes_parse_to_a_canonical_form(raw: object, wire: object) -> None:
    parsed = policy(raw)
    assert parsed.to_wire() == wire
    assert policy(parsed.to_wire()) == parsed  # the canonical form round-trips


@pytest.mark.parametrize(
    ("raw", "loc", "words"),
    [
        ({"mode": "bogus"}, ("mode",), "'open', 'none', 'allowlist' or 'denylist'"),
        ({"allow": ["10.0.0.0/33"]}, ("allow", 0), "not a valid CIDR"),
        ({"allow": ["ok.org", "10.0.0.1/8"]}, ("allow", 1), "host bits set"),
        ({"allow": ["a.org"], "deny": ["b.org"]}, (), "allow cannot be combined"),
        ({"allow": ["a.org"], "preset": "rl-leakage"}, (), "allow cannot be combined"),
        ({"mode": "open", "allow": []}, (), "mode 'open' takes no allow"),
        ({"mode": "none", "deny": ["x.org"]}, (), "mode 'none' takes no"),
        ({"mode": "allowlist"}, (), "needs an allow list"),
        ({"mode": "denylist"}, (), "needs a deny list or a preset"),
        ({"preset": "everything"}, ("preset",), "unknown preset 'everything'"),
        ({}, (), "give a mode"),
        ({"alow": ["pypi.org"]}, (), "unknown key 'alow'"),
        ({"allow": "pypi.org"}, ("allow",), "valid list"),
        ({"allow": ["*"]}, ("allow", 0), "use mode 'open'"),
        ({"deny": ["a..b"]}, ("deny", 0), "not a host name"),
        ({"deny": ["x.org:99999"]}, ("deny", 0), "port must be a number"),
        ({"deny": ["bücher.de"]}, ("deny", 0), "punycode"),
        ({"deny": ["*.a.*.b"]}, ("deny", 0), "wildcard may only be a leading"),
        ("open", (), "valid dictionary"),
    ],
)
def test_malformed_policies_name_the_field(
    raw: object, loc: tuple[object, ...], words: str
) -> None:
    got_loc, message = error_of(raw)
    assert got_loc == loc
    assert words in message


def test_wildcards_ports_and_networks_match_what_they_say() -> None:
    star = parse_entry("*.github.com")
    assert star.matches_name("api.github.com", 443)
    assert star.matches_name("a.b.github.com", 1)
    assert not star.matches_name("github.com", 443)
    assert not star.matches_name("evilgithub.com", 443)
    ssh_only = parse_entry("git.example.org:22")
    assert ssh_only.matches_name("git.example.org", 22)
    assert not ssh_only.matches_name("git.example.org", 443)
    net = parse_entry("10.20.0.0/16")
    assert net.matches_address(ip_address("10.20.255.1"), 80)
    assert net.matches_address(ip_address("::ffff:10.20.0.1"), 80)  # IPv4-mapped
    assert not net.matches_address(ip_address("10.21.0.1"), 80)
    assert not net.matches_name("10.20.0.1", 80)


@given(st.ip_addresses(), st.integers(min_value=0, max_value=128), st.integers(1, 65535))
def test_any_network_entry_round_trips(address: object, prefix: int, port: int) -> None:
    network = ip_network(
        f"{address}/{min(prefix, 32 if ':' not in str(address) else 128)}", strict=False
    )
    entry = parse_entry(str(network))
    assert entry.kind == "net" and parse_entry(entry.text) == entry
    assert entry.matches_address(network.network_address, port)


@given(
    st.from_regex(
        r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,3}",
        fullmatch=True,
    )
)
def test_host_names_are_case_and_dot_insensitive(name: str) -> None:
    entry = parse_entry(name.upper() + ".")
    if entry.kind == "net":  # an all-digit name like "1.2.3.4" is an address
        return
    assert entry.text == name and entry.matches_name(name, 80)


@given(st.text(max_size=40))
def test_no_string_crashes_the_parser(text: str) -> None:
    try:
        entry = parse_entry(text)
    except ValueError:
        return
    assert parse_entry(entry.text) == entry


def test_the_preset_is_data_and_covers_each_kind_of_answer_source() -> None:
    assert PRESETS == ("rl-leakage",)
    texts = {e.text for e in preset_entries("rl-leakage")}
    for host in (
        "github.com",
        "*.github.com",
        "stackoverflow.com",
        "leetcode.com",
        "codeforces.com",
        "huggingface.co",
        "*.huggingface.co",
    ):
        assert host in texts
    assert "pypi.org" not in texts  # package indexes stay reachable
    assert len(policy({"preset": "rl-leakage", "deny": ["x.org"]}).deny_rules) == len(texts) + 1


SETTINGS = EgressSettings.from_flags(internet=["127.0.0.2/31"])
PUBLIC = ip_address("93.184.216.34")


def decide(raw: object, host: str, port: int, addresses: list[str], **kw: Any) -> list[str]:
    pol = policy(raw) if isinstance(raw, dict) else raw
    assert isinstance(pol, EgressPolicy)
    target = Target.parse(host, port)
    named = check_target(pol, target)
    found = [ip_address(a) for a in addresses]
    ok = allowed_addresses(
        pol,
        target,
        found,
        SETTINGS,
        name_allowed=named,
        is_node=kw.get("is_node", lambda a, p: False),
    )
    return [str(a) for a in ok]


def refusal(raw: object, host: str, port: int, addresses: list[str], **kw: Any) -> str:
    with pytest.raises(Refused) as info:
        decide(raw, host, port, addresses, **kw)
    return str(info.value)


def test_open_reaches_public_addresses_and_nothing_private() -> None:
    assert decide(OPEN, "example.org", 443, [str(PUBLIC)]) == [str(PUBLIC)]
    for private in (
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        "100.64.0.1",
        "224.0.0.1",
    ):
        message = refusal(OPEN, private, 80, [private])
        assert "refused by egress policy open" in message


def test_a_name_resolving_to_a_private_address_is_refused_and_only_checked_addresses_are_used() -> (
    None
):
    message = refusal(OPEN, "rebind.test", 80, ["10.0.0.7"])
    assert "rebind.test:80" in message and "resolves to 10.0.0.7, a private address" in message
    # mixed answers: only the public one may be connected to
    assert decide(OPEN, "mixed.test", 80, ["10.0.0.7", str(PUBLIC)]) == [str(PUBLIC)]


def test_the_stand_in_internet_is_public_but_the_rest_of_loopback_is_not() -> None:
    assert decide(OPEN, "origin.test", 80, ["127.0.0.2"]) == ["127.0.0.2"]
    assert "loopback" in refusal(OPEN, "127.0.0.1", 80, ["127.0.0.1"])
    assert "loopback" in refusal(OPEN, "127.0.0.4", 80, ["127.0.0.4"])


def test_an_allowlist_reaches_only_what_it_names() -> None:
    allow = {"allow": ["pypi.test", "*.hub.test", "10.20.0.0/16", "127.0.0.1:9"]}
    assert decide(allow, "pypi.test", 443, [str(PUBLIC)]) == [str(PUBLIC)]
    assert decide(allow, "x.hub.test", 443, [str(PUBLIC)]) == [str(PUBLIC)]
    assert "not named by any allow entry" in refusal(allow, "other.test", 443, [str(PUBLIC)])
    assert "no allow entry names it" in refusal({"allow": ["pypi.test"]}, "other.test", 443, [])
    # private ranges only when named by IP or CIDR, even through a name
    assert decide(allow, "10.20.1.1", 5432, ["10.20.1.1"]) == ["10.20.1.1"]
    assert decide(allow, "db.internal", 5432, ["10.20.1.1"]) == ["10.20.1.1"]
    assert "private address" in refusal(allow, "pypi.test", 443, ["10.99.0.1"])
    assert decide(allow, "127.0.0.1", 9, ["127.0.0.1"]) == ["127.0.0.1"]
    assert "no allow entry" in refusal(allow, "127.0.0.1", 10, ["127.0.0.1"])


def test_the_nodes_own_socket_is_refused_even_when_named() -> None:
    allow = {"allow": ["127.0.0.1"]}
    node = lambda a, p: str(a) == "127.0.0.1" and p == 8080  # noqa: E731
    assert "node's own listening socket" in refusal(
        allow, "127.0.0.1", 8080, ["127.0.0.1"], is_node=node
    )
    assert decide(allow, "127.0.0.1", 8081, ["127.0.0.1"], is_node=node) == ["127.0.0.1"]


def test_a_denylist_refuses_its_names_and_addresses() -> None:
    deny = {"deny": ["bad.test", "203.0.113.0/24"], "preset": "rl-leakage"}
    assert "'bad.test'" in refusal(deny, "BAD.test.", 80, [str(PUBLIC)])
    assert "'*.github.com'" in refusal(deny, "raw.github.com", 443, [str(PUBLIC)])
    assert "203.0.113.0/24" in refusal(deny, "fine.test", 80, ["203.0.113.9"])
    assert decide(deny, "fine.test", 80, [str(PUBLIC)]) == [str(PUBLIC)]
    assert "private" in refusal(deny, "fine.test", 80, ["192.168.0.1"])


def test_none_refuses_everything() -> None:
    assert "has no egress" in refusal(NONE, "example.org", 443, [str(PUBLIC)])


def test_targets_reject_nonsense() -> None:
    for host, port in (
        ("", 80),
        ("a b", 80),
        ("x.org", 0),
        ("x.org", 70000),
        ("u@x.org", 80),
        ("bücher.de", 80),
        ("a\x00b", 80),
        ("x" * 254, 80),
    ):
        with pytest.raises(ValueError):
            Target.parse(host, port)
