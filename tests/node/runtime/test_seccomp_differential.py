"""Our seccomp filter against libseccomp's compiler: same action for every syscall.

The node builds its filter itself (``_sandbox/seccomp.py``, see
``docs/architecture.md``). Where libseccomp is installed (through ``pyseccomp``),
this builds the same policy with libseccomp, exports its BPF and runs both
programs on the same inputs: every syscall number of each architecture, the
x32 range, foreign architectures, and clone/socket arguments (hypothesis).
It also checks our syscall number tables against libseccomp's.

Arguments are 32-bit here: the kernel reads ``socket``'s domain as an ``int``
and every ``CLONE_NEW*`` flag lies in the low word, which is all our filter
compares; libseccomp compares 64 bits.
"""

from __future__ import annotations

import errno
import os
import tempfile
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collimate_rl.node.runtime._sandbox import seccomp as ours
from collimate_rl.node.runtime._sandbox.syscall_allowlist import allowed_calls
from collimate_rl.node.runtime._sandbox.syscalls import CLONE_NEW_MASK

from ._bpf import run_bpf

seccomp: Any = pytest.importorskip("pyseccomp")

ARCHES = {"x86_64": seccomp.Arch.X86_64, "aarch64": seccomp.Arch.AARCH64}
POLICIES: dict[str, dict[str, bool]] = {
    "exec": {},
    "bake": {"allow_inet": True},
    "service": {"allow_inet": True, "ip_only": True},
    "worker": {"no_spawn": True},
    "recorder": {"allowlist": False},
    "recorder-service": {"allowlist": False, "allow_inet": True, "ip_only": True},
}
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
ERRNO_EPERM = ours.SECCOMP_RET_ERRNO | errno.EPERM


def _libseccomp_filter(
    arch: str,
    allow_inet: bool = False,
    ip_only: bool = False,
    no_spawn: bool = False,
    allowlist: bool = True,
) -> bytes:
    """Our policy, written as libseccomp rules: the allowlist (every other call ENOSYS), or
    the recorder's (every other call allowed)."""
    try:
        f = seccomp.SyscallFilter(seccomp.ERRNO(errno.ENOSYS) if allowlist else seccomp.ALLOW)
    except (OSError, RuntimeError, AttributeError) as exc:  # pragma: no cover
        pytest.skip(f"libseccomp is not loadable: {exc}")
    f.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    if ARCHES[arch] != seccomp.system_arch():
        f.add_arch(ARCHES[arch])
        f.remove_arch(seccomp.Arch.NATIVE)
    table = ours.SYSCALLS[arch]
    eperm = seccomp.ERRNO(errno.EPERM)
    refused = {*ours.DENY_COMMON, "iopl", "ioperm", "clone3", "clone", "socket", "socketpair"}
    if no_spawn:
        refused |= set(ours.DENY_SPAWN)
    if allowlist:
        for name in sorted(allowed_calls(arch) - refused - {"personality"}):
            if name in table and seccomp.resolve_syscall(ARCHES[arch], name) >= 0:
                f.add_rule(seccomp.ALLOW, name)
        for persona in ours.PERSONALITIES:
            f.add_rule(seccomp.ALLOW, "personality", seccomp.Arg(0, seccomp.EQ, persona))
    for name in [*ours.DENY_COMMON, "iopl", "ioperm"]:
        if name in table and seccomp.resolve_syscall(ARCHES[arch], name) >= 0:
            f.add_rule(eperm, name)  # (the newest ones may be unknown to it: skipped)
    if (
        not allowlist
    ):  # (the allowlist's default already: libseccomp refuses a rule that repeats it)
        f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    if no_spawn:  # a worker: no process creation at all
        for name in [*ours.DENY_SPAWN, "clone"]:
            if name in table:
                f.add_rule(eperm, name)
    if allowlist and not no_spawn:
        f.add_rule(seccomp.ALLOW, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEW_MASK, 0))
    bit = 1
    while bit <= CLONE_NEW_MASK and not no_spawn:
        if CLONE_NEW_MASK & bit:
            f.add_rule(eperm, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, bit, bit))
        bit <<= 1
    refuse = seccomp.ERRNO(errno.EAFNOSUPPORT)
    for name in ("socket", "socketpair"):
        if allowlist and (not allow_inet or ip_only):
            for family in (AF_UNIX, AF_INET, AF_INET6) if allow_inet else (AF_UNIX,):
                f.add_rule(seccomp.ALLOW, name, seccomp.Arg(0, seccomp.EQ, family))
        elif allowlist:
            f.add_rule(seccomp.ALLOW, name)
        if not allow_inet:
            f.add_rule(refuse, name, seccomp.Arg(0, seccomp.NE, AF_UNIX))
        elif ip_only:  # every domain but 1, 2 and 10, as one rule per range
            f.add_rule(refuse, name, seccomp.Arg(0, seccomp.EQ, 0))
            for domain in range(3, AF_INET6):
                f.add_rule(refuse, name, seccomp.Arg(0, seccomp.EQ, domain))
            f.add_rule(refuse, name, seccomp.Arg(0, seccomp.GT, AF_INET6))
    with tempfile.TemporaryFile() as fh:
        f.export_bpf(fh)
        fh.seek(0)
        return fh.read()


def _known_to_libseccomp(arch: str) -> dict[str, int]:
    """Our table's entries that this libseccomp version can resolve, by its numbers."""
    out = {}
    for name in ours.SYSCALLS[arch]:
        number = seccomp.resolve_syscall(ARCHES[arch], name)
        if number >= 0:
            out[name] = number
    return out


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_our_syscall_numbers_match_libseccomp(arch: str) -> None:
    known = _known_to_libseccomp(arch)
    # only the calls newer than this libseccomp may be unknown to it (457 and up)
    assert all(ours.SYSCALLS[arch][name] >= 457 for name in set(ours.SYSCALLS[arch]) - set(known))
    assert {name: ours.SYSCALLS[arch][name] for name in known} == known
    prog, aid = ours.build_seccomp_filter(arch), ours.ARCH_IDS[arch]
    for name in set(ours.SYSCALLS[arch]) - set(known):  # too new for it: we still deny
        if name in ours.DENY_COMMON:
            assert run_bpf(prog, ours.SYSCALLS[arch][name], aid) == ERRNO_EPERM, name


@pytest.mark.parametrize("arch", sorted(ARCHES))
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_syscall_gets_the_same_action(arch: str, policy: str) -> None:
    theirs = _libseccomp_filter(arch, **POLICIES[policy])
    mine = ours.build_seccomp_filter(arch, **POLICIES[policy])
    aid = ours.ARCH_IDS[arch]
    known = set(_known_to_libseccomp(arch).values())
    for nr in range(0, 1024):
        if nr in ours.SYSCALLS[arch].values() and nr not in known:
            continue  # a syscall this libseccomp cannot name (it lets it through)
        for args in ((0,), (AF_UNIX,), (AF_INET,), (CLONE_NEW_MASK,), (0x20008,), (0x0040000,)):
            assert run_bpf(mine, nr, aid, args) == run_bpf(theirs, nr, aid, args), (nr, args)
    for other in set(ours.ARCH_IDS.values()) - {aid}:
        assert run_bpf(mine, 0, other) == run_bpf(theirs, 0, other) == ours.SECCOMP_RET_KILL_PROCESS
    if arch == "x86_64":
        for nr in (0x40000000, 0x40000000 | 59, 0x7FFFFFFF):
            assert (
                run_bpf(mine, nr, aid) == run_bpf(theirs, nr, aid) == ours.SECCOMP_RET_KILL_PROCESS
            )


@settings(max_examples=300, deadline=None)
@given(
    arch=st.sampled_from(sorted(ARCHES)),
    policy=st.sampled_from(sorted(POLICIES)),
    name=st.sampled_from(["clone", "socket", "socketpair", "personality"]),
    arg=st.one_of(
        st.integers(0, 0xFFFFFFFF),
        st.sampled_from([0, 1, 2, 3, 9, 10, 11, 16, 17, 0x11, *ours.PERSONALITIES]),
        st.integers(0, 31).map(lambda b: 1 << b),
    ),
)
def test_clone_and_socket_arguments_agree(arch: str, policy: str, name: str, arg: int) -> None:
    theirs, mine = _filters(arch, policy)
    nr = ours.SYSCALLS[arch][name]
    aid = ours.ARCH_IDS[arch]
    assert run_bpf(mine, nr, aid, (arg,)) == run_bpf(theirs, nr, aid, (arg,))


_CACHE: dict[tuple[str, str], tuple[bytes, bytes]] = {}


def _filters(arch: str, policy: str) -> tuple[bytes, bytes]:
    key = (arch, policy)
    if key not in _CACHE:
        _CACHE[key] = (
            _libseccomp_filter(arch, **POLICIES[policy]),
            ours.build_seccomp_filter(arch, **POLICIES[policy]),
        )
    return _CACHE[key]


def test_the_kernel_agrees_on_our_filter() -> None:
    """Loaded for real in a child: denied calls fail with our errno, others work."""
    import socket

    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            from collimate_rl.node.runtime._sandbox.syscalls import (
                CLONE_NEWUSER,
                PR_SET_NO_NEW_PRIVS,
                prctl,
                unshare,
            )

            prctl(PR_SET_NO_NEW_PRIVS, 1)
            ours.load_seccomp(ours.build_seccomp_filter())
            try:
                socket.socket(socket.AF_INET)
            except OSError as exc:
                assert exc.errno == errno.EAFNOSUPPORT
            else:
                raise AssertionError("AF_INET allowed")
            socket.socket(socket.AF_UNIX).close()
            try:
                unshare(CLONE_NEWUSER)
            except OSError as exc:
                assert exc.errno == errno.EPERM
            else:
                raise AssertionError("unshare allowed")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_kernel_agrees_on_the_workers_filter() -> None:
    """A node worker's filter (``no_spawn``): no fork, no clone, no exec; the rest works."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            from collimate_rl.node.runtime._sandbox.syscalls import PR_SET_NO_NEW_PRIVS, prctl

            prctl(PR_SET_NO_NEW_PRIVS, 1)
            ours.load_seccomp(ours.build_seccomp_filter(no_spawn=True))
            for attempt in (os.fork, lambda: os.execv("/bin/true", ["true"])):
                try:
                    attempt()
                except OSError as exc:
                    assert exc.errno == errno.EPERM
                else:  # pragma: no cover - a failure
                    os._exit(3)
            r, w = os.pipe()
            os.write(w, b"ok")
            assert os.read(r, 2) == b"ok"
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
