"""The Landlock fence of sandboxed code: write only the session's writable paths, read the rest,
and, in a session without network, no TCP bind or connect.

Three syscalls of our own through ctypes (stdlib only, as everything in the sandbox; see
``docs/security.md``, "Landlock", for why not the ``landlock`` PyPI bindings). Defense in
depth beside the read-only mounts, the uid and seccomp: where the kernel lacks Landlock the
fence is skipped (the node logs it once, ``surface.py``), never an error.

The master probes the ABI and builds the C structures once (``Fence``); each box, exec child
and factory then applies it in its own mount namespace (path rules hold inodes, so they are
made there), after its mounts and before its seccomp filter.

>>> writable_paths({})
('/sandbox', '/tmp', '/dev')
>>> writable_paths({"writable_paths": ["/"]})
('/',)
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Mapping
from typing import Any

from .layout import SANDBOX_DIR
from .syscalls import _syscall

#: Same numbers on x86_64 and aarch64 (the calls are newer than the split of the tables).
NR_CREATE_RULESET, NR_ADD_RULE, NR_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
#: Filesystem rights by ABI: 1 has the first 13, 2 adds REFER, 3 TRUNCATE, 5 IOCTL_DEV.
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
FS_EXECUTE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_O_PATH_CLOEXEC = os.O_PATH | os.O_CLOEXEC  # (made once: an int made in a box costs a page)
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6


def writable_paths(cfg: Mapping[str, Any]) -> tuple[str, ...]:
    """The paths a session's code may write below: its working folder, ``/tmp`` and ``/dev``
    (``/dev/null``, ``/dev/shm``, its ptys). Not ``/proc``: no writing another process's
    ``mem`` or attributes (a write through ``/proc/self/fd`` lands where the file lives, and
    pipes and sockets are not fenced), and each rule costs a box ~40 us.

    The one place that says it: a template whose sessions write elsewhere (an image's
    copy-on-write root) names its paths in its config's ``writable_paths``.
    """
    named = cfg.get("writable_paths")
    if named:
        return tuple(str(p) for p in named)
    return (SANDBOX_DIR, "/tmp", "/dev")


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (or it is disabled)."""
    abi = int(_syscall()(NR_CREATE_RULESET, 0, 0, LANDLOCK_CREATE_RULESET_VERSION, 0, 0))
    return abi if abi > 0 else 0


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class Fence:
    """A Landlock policy, ready to apply (built where no box exists yet: the master).

    ``networked``: the session may bind and connect TCP (else neither, where the ABI can
    say so). ``abi`` 0: nothing to apply.
    """

    def __init__(
        self, networked: bool, abi: int | None = None, writable: tuple[str, ...] = ()
    ) -> None:
        #: the paths :meth:`apply` fences by default (``writable_paths`` of the template)
        self.writable = writable
        self.abi = landlock_abi() if abi is None else abi
        every = max(
            (rights for level, rights in _FS_BY_ABI.items() if level <= self.abi), default=0
        )
        # Reads are not handled at all, so they need no rule and cost nothing: a handled
        # right makes the kernel walk the path of every open (a Python import opens many).
        fs = every & ~FS_READ
        net = 0 if networked or self.abi < 4 else NET_BIND_TCP | NET_CONNECT_TCP
        # abstract unix sockets: none to a process outside the fence (a service, the
        # relay, another session's leftovers). Signals are not scoped: a session's code may
        # still stop its own service or relay, which breaks only its own session (the tests
        # of services and egress say so).
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET if self.abi >= 6 else 0
        self.fs_rights = fs
        # (the sizes tell an older kernel which fields we know: ABI 1-3 take 8 bytes, 4-5 16)
        self._attr = _RulesetAttr(fs, net, scoped)
        self._attr_size = 8 if self.abi < 4 else (16 if self.abi < 6 else 24)
        self._write = _PathBeneath(fs, -1)
        # What apply() passes, made here (the master) and only read in a box: libc's
        # ``syscall`` without argtypes and the structures' addresses as ready C pointers
        # (converting arguments in a fresh fork copies pages: ~55 us of a box's ~160).
        self._call: Any = ctypes.CDLL(None, use_errno=True).syscall
        self._attr_ptr = ctypes.c_void_p(ctypes.addressof(self._attr))
        self._write_ptr = ctypes.c_void_p(ctypes.addressof(self._write))

    def apply(self, writable: tuple[str, ...] | None = None) -> bool:
        """Restrict the calling thread (and every later child): write only below ``writable``
        (reading, executing and listing stay as the mounts and modes say).

        Needs ``no_new_privs``. False where the kernel has no Landlock; raises if it has and
        the fence cannot be built (a missing writable path is skipped).
        """
        if self.abi <= 0:
            return False
        call = self._call
        if writable is None:
            writable = self.writable
        ruleset = call(NR_CREATE_RULESET, self._attr_ptr, self._attr_size, 0)
        if ruleset < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
        try:
            for path in writable:
                try:
                    fd = os.open(path, _O_PATH_CLOEXEC)
                except FileNotFoundError:
                    continue
                self._write.parent_fd = fd
                added = call(NR_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, self._write_ptr, 0)
                os.close(fd)
                if added < 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"landlock_add_rule {path}: {os.strerror(err)}")
            if call(NR_RESTRICT_SELF, ruleset, 0) < 0:
                raise OSError(ctypes.get_errno(), "landlock_restrict_self")
        finally:
            os.close(ruleset)
        return True


def probe_error() -> str | None:
    """Why Landlock is unavailable here (``None``: it is)."""
    abi = int(_syscall()(NR_CREATE_RULESET, 0, 0, LANDLOCK_CREATE_RULESET_VERSION, 0, 0))
    if abi > 0:
        return None
    err = ctypes.get_errno()
    if err == errno.EOPNOTSUPP:
        return "Landlock is built in but disabled (boot with lsm=...,landlock)"
    return f"no Landlock in this kernel ({os.strerror(err)})"
