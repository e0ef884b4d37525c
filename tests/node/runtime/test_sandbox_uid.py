"""The dedicated sandbox uid: used by no account, group or subordinate range; explicit ones checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collimate_rl.node.runtime import SANDBOX_UID_BASE, resolve_sandbox_uid
from collimate_rl.node.runtime.sandbox_uid import HostIds

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the uid is picked only for a root node")


def _host(passwd: str = "", group: str = "", subuid: str = "", subgid: str = "") -> HostIds:
    return HostIds.parse(passwd=passwd, group=group, subuid=subuid, subgid=subgid, nss=False)


def test_the_pick_skips_users_groups_and_subordinate_ranges() -> None:
    base = SANDBOX_UID_BASE
    assert _host().pick() == base
    host = _host(
        passwd=f"a:x:{base}:1::/:/bin/sh\nbroken line\n",
        group=f"g:x:{base + 1}:\n",
        subuid=f"alice:{base + 2}:10\n",
        subgid=f"bob:{base + 12}:3\n",
    )
    assert host.pick() == base + 15
    assert host.users_of(base + 12) == ["a subordinate range of bob (/etc/subgid)"]
    assert host.users_of(base + 15) == []


@given(st.sets(st.integers(min_value=0, max_value=40), max_size=30))
def test_the_pick_is_the_first_free_uid(taken: set[int]) -> None:
    passwd = "".join(f"u{i}:x:{SANDBOX_UID_BASE + i}:0::/:/bin/sh\n" for i in taken)
    picked = _host(passwd=passwd).pick() - SANDBOX_UID_BASE
    assert picked not in taken and all(i in taken for i in range(picked))


def test_the_hosts_real_accounts() -> None:
    host = HostIds.read()
    assert any("nobody" in who for who in host.users_of(65534))
    assert host.users_of(0)  # root


@root_only
def test_the_default_is_a_uid_nobody_on_this_host_uses() -> None:
    uid = resolve_sandbox_uid(None)
    assert uid >= SANDBOX_UID_BASE and uid != 65534
    ids = {
        int(line.split(":")[2])
        for name in ("passwd", "group")
        for line in Path(f"/etc/{name}").read_text().splitlines()
        if line.count(":") >= 2 and line.split(":")[2].isdigit()
    }
    assert uid not in ids
    assert resolve_sandbox_uid(None) == uid  # deterministic


@root_only
def test_an_explicit_uid_is_checked(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ValueError, match="never root"):
        resolve_sandbox_uid(0)
    with caplog.at_level("WARNING"):
        assert resolve_sandbox_uid(65534) == 65534
    assert "also used by user nobody" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert resolve_sandbox_uid(SANDBOX_UID_BASE + 12345) == SANDBOX_UID_BASE + 12345
    assert caplog.text == ""
