"""The host uid sandboxes run as: a dedicated one that no account of the host uses.

A root node starts every sandbox through a drop to one host uid. Whoever else
runs as that uid can signal, trace and read the processes and files of the
sandboxed code, and the code can do the same to them. ``nobody`` (65534), the
usual target of such drops, is exactly the uid that is shared: other daemons'
``User=nobody``, NFS root squashing, the kernel's overflow uid.

The default is the first uid from :data:`SANDBOX_UID_BASE` up that is neither
a user's uid nor a group's gid (``/etc/passwd``, ``/etc/group`` and whatever
else the name service knows) nor inside a subordinate id range
(``/etc/subuid``, ``/etc/subgid``: the host uids of rootless containers).
The sandbox's gid is the same number. The pick is deterministic: the same
accounts give the same uid on every start, so files a crashed node's
sandboxes left are recognisably theirs. 2,000,000,000 lies in the range
systemd leaves unallocated between its container ranges (524288..1879048191)
and the upper half of ``uid_t`` (>= 2**31), which some tools read as signed.

``collimate serve --sandbox-uid UID`` (``create_runtime(sandbox_uid=...)``)
picks another; a uid an account uses is accepted with a warning.

>>> passwd = "root:x:0:0::/root:/bin/sh\\nsvc:x:2000000000:5::/:/bin/false\\n"
>>> group = "root:x:0:\\nteam:x:2000000001:\\n"
>>> subuid = "alice:2000000002:65536\\n"
>>> used = HostIds.parse(passwd=passwd, group=group, subuid=subuid, subgid="", nss=False)
>>> used.pick()
2000065538
>>> used.users_of(2000000000)
['user svc (/etc/passwd)']
"""

from __future__ import annotations

import contextlib
import grp
import logging
import os
import pwd
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "BAKE_ID_COUNT",
    "SANDBOX_UID_BASE",
    "HostIds",
    "resolve_bake_range",
    "resolve_sandbox_uid",
]

log = logging.getLogger("collimate_rl.node.runtime")

#: Where the search for a free sandbox uid starts.
SANDBOX_UID_BASE: Final = 2_000_000_000
#: How many uids from the base are tried before giving up.
SANDBOX_UID_SPAN: Final = 1 << 20
_UID_MAX: Final = (1 << 32) - 2  # (uid_t)-1 means "unchanged" to setuid/chown
#: How many ids an image bake's user namespace maps (0..65535 inside).
BAKE_ID_COUNT: Final = 65536


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def _ids(text: str, field_index: int, kind: str, source: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) > field_index and parts[field_index].isdigit():
            out.setdefault(int(parts[field_index]), f"{kind} {parts[0]} ({source})")
    return out


def _ranges(text: str, source: str) -> list[tuple[int, int, str]]:
    out = []
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            start, count = int(parts[1]), int(parts[2])
            out.append((start, start + count, f"a subordinate range of {parts[0]} ({source})"))
    return out


@dataclass
class HostIds:
    """The uids and gids the host's accounts use, and its subordinate id ranges.

    Attributes:
        ids: a used number -> who uses it (users and groups together: a
            sandbox's uid and gid are the same number).
        ranges: ``(start, end, who)``, end exclusive.
        nss: also ask the name service (LDAP, sssd, ...) about a candidate.
    """

    ids: dict[int, str] = field(default_factory=dict)
    ranges: list[tuple[int, int, str]] = field(default_factory=list)
    nss: bool = True

    @classmethod
    def parse(cls, *, passwd: str, group: str, subuid: str, subgid: str, nss: bool) -> HostIds:
        """From the text of the four files."""
        ids = _ids(passwd, 2, "user", "/etc/passwd")
        for gid, who in _ids(group, 2, "group", "/etc/group").items():
            ids.setdefault(gid, who)
        ranges = _ranges(subuid, "/etc/subuid") + _ranges(subgid, "/etc/subgid")
        return cls(ids, ranges, nss)

    @classmethod
    def read(cls, etc: str = "/etc") -> HostIds:
        """This host's accounts."""
        return cls.parse(
            passwd=_read(f"{etc}/passwd"),
            group=_read(f"{etc}/group"),
            subuid=_read(f"{etc}/subuid"),
            subgid=_read(f"{etc}/subgid"),
            nss=True,
        )

    def users_of(self, uid: int) -> list[str]:
        """Who uses ``uid`` (as a uid, a gid or inside a subordinate range)."""
        found = [self.ids[uid]] if uid in self.ids else []
        found += [who for start, end, who in self.ranges if start <= uid < end]
        if self.nss and not found:
            found += self._nss(uid)
        return found

    @staticmethod
    def _nss(uid: int) -> list[str]:
        found = []
        with contextlib.suppress(KeyError, OverflowError):
            found.append(f"user {pwd.getpwuid(uid).pw_name} (name service)")
        with contextlib.suppress(KeyError, OverflowError):
            found.append(f"group {grp.getgrgid(uid).gr_name} (name service)")
        return found

    def pick(self, candidates: Iterable[int] | None = None) -> int:
        """The first candidate (default: from :data:`SANDBOX_UID_BASE` up) nobody uses."""
        pool = range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + SANDBOX_UID_SPAN)
        for uid in pool if candidates is None else candidates:
            if not self.users_of(uid):
                return uid
        raise RuntimeError(
            f"no free sandbox uid in {SANDBOX_UID_BASE}..{SANDBOX_UID_BASE + SANDBOX_UID_SPAN}; "
            "pass --sandbox-uid"
        )

    def free_range(self, start: int, count: int, span: int = SANDBOX_UID_SPAN) -> int:
        """The first base from ``start`` up (within ``span``) of ``count`` consecutive ids
        that no account uses and no subordinate range overlaps (with ``nss``, neither does
        any account the name service can list)."""
        used = set(self.ids)
        if self.nss:
            with contextlib.suppress(OSError):
                used.update(p.pw_uid for p in pwd.getpwall())
                used.update(g.gr_gid for g in grp.getgrall())
        base, limit = start, min(start + span, _UID_MAX + 1 - count)
        while base <= limit:
            end = base + count
            clash = [u for u in used if base <= u < end]
            clash += [e - 1 for s, e, _ in self.ranges if s < end and base < e]
            if not clash:
                return base
            base = max(clash) + 1
        raise RuntimeError(f"no {count} free host ids from {start} up for an image bake")


def resolve_bake_range(sandbox_uid: int, host: HostIds | None = None) -> int:
    """The first host id of an image bake's range (:data:`BAKE_ID_COUNT` ids: uids and gids
    0..65535 of the bake, as root): directly above the sandbox uid, free of every account
    and subordinate range as the sandbox uid is (:meth:`HostIds.free_range`). Deterministic
    for the same accounts; nothing but a bake runs as these ids, and the layer a bake leaves
    is the sandbox uid's again before any session sees it.

    >>> HostIds.parse(passwd="a:x:7:7::/:/bin/sh\\n", group="", subuid="b:10:5\\n",
    ...               subgid="", nss=False).free_range(5, 4)
    15
    """
    return (host or HostIds.read()).free_range(sandbox_uid + 1, BAKE_ID_COUNT)


def resolve_sandbox_uid(requested: int | None, host: HostIds | None = None) -> int:
    """The sandbox uid to use: ``requested`` (checked), else the default pick.

    Raises:
        ValueError: ``requested`` is 0 (root) or not a valid uid.
    """
    if requested is not None:
        uid = int(requested)
        if not 0 < uid <= _UID_MAX:
            raise ValueError(f"sandbox uid must be within 1..{_UID_MAX} (never root), got {uid}")
        if os.geteuid() == 0:
            users = (host or HostIds.read()).users_of(uid)
            if users:
                log.warning(
                    "sandbox uid %d is also used by %s: they can signal and trace sandboxed "
                    "code (and it them); the default picks a uid nobody uses",
                    uid,
                    ", ".join(users),
                )
        return uid
    if os.geteuid() != 0:  # sandboxes run as the node's own uid: nothing to pick
        return os.geteuid()
    uid = (host or HostIds.read()).pick()
    log.info("sandboxes run as host uid %d (used by no account of this host)", uid)
    return uid
