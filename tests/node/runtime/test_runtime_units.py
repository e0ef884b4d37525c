"""Unit tests of the pure parts: the seccomp BPF program and the seed helpers."""

from __future__ import annotations

import errno

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collimate_rl.node.runtime._sandbox import box, layers, running_exec, seeding, syscalls
from collimate_rl.node.runtime._sandbox import seccomp as sv

from ._bpf import execute, run_bpf

X86 = sv.SYSCALLS["x86_64"]


ERR = sv.SECCOMP_RET_ERRNO
ALLOW = sv.SECCOMP_RET_ALLOW


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_filter_shape(arch: str) -> None:
    prog = sv.build_seccomp_filter(arch)
    assert len(prog) % 8 == 0 and 0 < len(prog) // 8 < 4096
    aid = sv.ARCH_IDS[arch]
    nr = sv.SYSCALLS[arch]
    assert run_bpf(prog, nr["socket"], aid, (1,)) == ALLOW  # AF_UNIX
    assert run_bpf(prog, nr["socket"], aid, (2,)) == ERR | errno.EAFNOSUPPORT  # AF_INET
    assert run_bpf(prog, nr["socket"], aid, (10,)) == ERR | errno.EAFNOSUPPORT  # AF_INET6
    assert run_bpf(prog, nr["socketpair"], aid, (16,)) == ERR | errno.EAFNOSUPPORT  # NETLINK
    assert run_bpf(prog, nr["clone"], aid, (17,)) == ALLOW  # plain fork (SIGCHLD)
    assert run_bpf(prog, nr["clone"], aid, (syscalls.CLONE_NEWUSER | 17,)) == ERR | errno.EPERM
    assert run_bpf(prog, nr["clone"], aid, (syscalls.CLONE_NEWNET,)) == ERR | errno.EPERM
    assert run_bpf(prog, nr["clone3"], aid) == ERR | errno.ENOSYS
    for name in (
        "ptrace",
        "mount",
        "unshare",
        "setns",
        "bpf",
        "keyctl",
        "perf_event_open",
        "io_uring_setup",
        "userfaultfd",
        "open_by_handle_at",
        "fsopen",
        "move_mount",
    ):
        assert run_bpf(prog, nr[name], aid) == ERR | errno.EPERM, name
    assert run_bpf(prog, 0, aid) == ALLOW  # read / io_setup
    other = sv.AUDIT_ARCH_AARCH64 if arch == "x86_64" else sv.AUDIT_ARCH_X86_64
    assert run_bpf(prog, 0, other) == sv.SECCOMP_RET_KILL_PROCESS


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize(
    "policy", [{}, {"allow_inet": True}, {"allow_inet": True, "ip_only": True}, {"no_spawn": True}]
)
def test_every_syscall_is_decided_in_a_few_instructions(arch: str, policy: dict[str, bool]) -> None:
    """The rules are searched, not chained: each time a box loads the filter the kernel runs it
    once per syscall number (its action cache), and a chain of ~50 comparisons made that load
    cost ~25-50 us more (``benchmarks/history.md``, round 13)."""
    prog = sv.build_seccomp_filter(arch, **policy)
    aid = sv.ARCH_IDS[arch]
    steps = [execute(prog, nr, aid, (arg,))[1] for nr in range(1024) for arg in (0, 1, 1 << 28)]
    assert max(steps) <= 18  # (a search ~9 deep; personality's check compares five values)


def test_x32_is_killed_and_io_ports_denied() -> None:
    prog = sv.build_seccomp_filter("x86_64")
    assert run_bpf(prog, 0x40000000 | 1, sv.AUDIT_ARCH_X86_64) == sv.SECCOMP_RET_KILL_PROCESS
    assert run_bpf(prog, X86["iopl"], sv.AUDIT_ARCH_X86_64) == ERR | errno.EPERM
    assert run_bpf(prog, X86["ioperm"], sv.AUDIT_ARCH_X86_64) == ERR | errno.EPERM


def test_inet_allowed_for_bakes() -> None:
    prog = sv.build_seccomp_filter("x86_64", allow_inet=True)
    assert run_bpf(prog, X86["socket"], sv.AUDIT_ARCH_X86_64, (2,)) == ALLOW
    assert run_bpf(prog, X86["ptrace"], sv.AUDIT_ARCH_X86_64) == ERR | errno.EPERM


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_services_get_ip_sockets_only(arch: str) -> None:
    prog = sv.build_seccomp_filter(arch, allow_inet=True, ip_only=True)
    aid, nr = sv.ARCH_IDS[arch], sv.SYSCALLS[arch]
    for family in (1, 2, 10):  # AF_UNIX, AF_INET, AF_INET6
        assert run_bpf(prog, nr["socket"], aid, (family,)) == ALLOW
    for family in (16, 17, 0, 3):  # NETLINK, PACKET, AF_UNSPEC, AX25
        assert run_bpf(prog, nr["socket"], aid, (family,)) == ERR | errno.EAFNOSUPPORT
    assert run_bpf(prog, nr["socketpair"], aid, (1,)) == ALLOW
    assert run_bpf(prog, nr["socketpair"], aid, (16,)) == ERR | errno.EAFNOSUPPORT
    assert run_bpf(prog, nr["ptrace"], aid) == ERR | errno.EPERM
    assert run_bpf(prog, nr["clone"], aid, (syscalls.CLONE_NEWNET,)) == ERR | errno.EPERM
    assert run_bpf(prog, 0, aid) == ALLOW


def test_seed_words_and_timeout_message() -> None:
    seed = "00" * 31 + "01"
    words = seeding.seed_words(seed)
    assert len(words) == 8 and words[-1] == 1 and words[0] == 0
    assert running_exec.format_timeout(30) == b"timeout after 30.0s"
    assert running_exec.format_timeout(0.25) == b"timeout after 0.25s"


@given(st.text(alphabet="0123456789abcdef", min_size=1, max_size=80))
def test_seed_words_are_the_seeds_low_256_bits_most_significant_word_first(seed: str) -> None:
    value = int(seed, 16)
    assert seeding.seed_words(seed) == [(value >> (32 * i)) & 0xFFFFFFFF for i in range(7, -1, -1)]


def test_overlay_option_length_is_bounded() -> None:
    with pytest.raises(OSError):
        layers.overlay_options([f"/.collimate/s/abc/u{i}" for i in range(400)], "/x", 1)


@pytest.mark.parametrize(
    ("change", "fit"),
    [
        ({}, True),
        ({"cpu_seconds": -1, "address_space_bytes": -1}, True),  # unlimited
        ({"cpu_seconds": 0}, False),  # the init's own CPU would meet RLIMIT_CPU
        ({"open_files": 8}, False),  # too few descriptors to take the next pipes
        ({"address_space_bytes": 64 << 20}, False),  # no room to read the next job
    ],
)
def test_an_exec_box_serves_again_only_under_limits_that_leave_it_room(
    change: dict[str, int], fit: bool
) -> None:
    limits = {"cpu_seconds": 3600, "address_space_bytes": 64 << 30, "open_files": 256}
    spec = box.BoxSpec("exec", [], -1, {"limits": {**limits, **change}}, 40)
    assert box._fit_for_another(spec) is fit


@given(
    st.tuples(*[st.sampled_from([-1, 7]) for _ in range(3)]),
    st.one_of(st.none(), st.integers(0, 2)),
)
def test_the_master_steps_into_only_the_namespaces_asked_and_home_from_only_those(
    asked: tuple[int, int, int], failing: int | None
) -> None:
    # Every setns is a syscall the master pays per box: stepping into one namespace (the
    # network pool's check, a spare mount namespace's look) costs one setns there and one
    # back, never one per kind. A setns that fails brings home what was entered before it.
    from collimate_rl.node.runtime._sandbox import home as home_module

    kinds = [nstype for _kind, nstype in home_module.Home.KINDS]
    homes = {nstype: 100 + i for i, nstype in enumerate(kinds)}
    refused = kinds[failing] if failing is not None else None
    calls: list[tuple[int, int]] = []

    def fake_setns(fd: int, nstype: int) -> None:
        if fd == 7 and nstype == refused:
            raise OSError(errno.EPERM, "refused")
        calls.append((fd, nstype))

    home = home_module.Home.__new__(home_module.Home)
    home.fds = {kind: homes[nstype] for kind, nstype in home_module.Home.KINDS}
    patch = pytest.MonkeyPatch()
    patch.setattr(home_module, "setns", fake_setns)
    try:
        entering = [nstype for fd, nstype in zip(asked, kinds, strict=True) if fd >= 0]
        if refused is not None and refused in entering:
            with pytest.raises(OSError):
                home.step_in(*asked)
            entered = entering[: entering.index(refused)]
            assert calls == [(7, t) for t in entered] + [(homes[t], t) for t in entered]
        else:
            home.step_out(home.step_in(*asked))
            assert calls == [(7, t) for t in entering] + [(homes[t], t) for t in entering]
    finally:
        patch.undo()
