"""The seccomp filter of sandboxed processes: a classic-BPF program built here.

Stdlib only; no libseccomp (see ``docs/architecture.md``, "Seccomp", for why,
and ``tests/node/runtime/test_seccomp_differential.py`` for the check against
libseccomp's own compiler where it is installed).

>>> len(build_seccomp_filter("x86_64")) % 8
0
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

from .syscall_allowlist import allowed_calls
from .syscall_table import SYSCALL_NUMBERS
from .syscalls import CLONE_NEW_MASK, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prctl

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06
AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
#: The ``personality`` values Docker's default profile allows: PER_LINUX, PER_LINUX32,
#: UNAME26, UNAME26 | PER_LINUX32, and 0xffffffff (a query that changes nothing).
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

#: Process creation, denied too for a process that must never start one (``no_spawn``).
DENY_SPAWN = ["fork", "vfork", "execve", "execveat"]

#: Syscalls denied outright, with EPERM (numbers per architecture).
#: What a job of an image's warm fork-server needs to build its root (``nest``).
NEST_CALLS = ("clone", "unshare", "setns", "mount", "umount2", "pivot_root")
DENY_COMMON = [
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "open_tree_attr",
    "mount_setattr",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "quotactl_fd",
    "kcmp",
    "lookup_dcookie",
]

#: ``{architecture: {syscall name: number}}``, every call of both (``syscall_table.py``).
SYSCALLS: dict[str, dict[str, int]] = SYSCALL_NUMBERS

ARCH_IDS = {"x86_64": AUDIT_ARCH_X86_64, "aarch64": AUDIT_ARCH_AARCH64}


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def build_seccomp_filter(
    arch: str | None = None,
    *,
    allow_inet: bool = False,
    ip_only: bool = False,
    no_spawn: bool = False,
    allowlist: bool = True,
    nest: bool = False,
) -> bytes:
    """Return the raw BPF program (``struct sock_filter[]``) for ``arch``.

    With ``allowlist`` (the default) only the calls of ``syscall_allowlist.allowed_calls``
    are allowed and every other number gets ENOSYS; ``personality`` only with the values
    Docker allows (else ENOSYS). Without it (``allowlist=False``: the recorder's, see
    ``syscall_recorder.py``) every other number is allowed. Either way: sockets other than
    AF_UNIX get EAFNOSUPPORT (unless ``allow_inet``; with ``ip_only`` too, AF_INET/AF_INET6
    are allowed, every other family not), clone with any CLONE_NEW* flag EPERM, clone3
    ENOSYS (glibc falls back to clone), and the syscalls in ``DENY_COMMON`` plus
    iopl/ioperm EPERM. With ``nest`` (an image's warm fork-server, ``image_zygote.py``:
    its candidates build their own namespaces, then load the default filter on top) ``clone``
    with any flags, ``unshare``, ``setns``, ``mount``, ``umount2`` and ``pivot_root`` are
    allowed. With ``no_spawn`` (a node worker, which never starts a process) every
    ``clone`` and the syscalls in ``DENY_SPAWN`` get EPERM too. A foreign architecture or
    an x32 syscall kills the process.
    """
    arch = arch or os.uname().machine
    if arch not in SYSCALLS:
        raise OSError(errno.ENOSYS, f"no seccomp table for architecture {arch}")
    nr = SYSCALLS[arch]
    prog: list[bytes] = [
        _ins(_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _ins(_BPF_JEQ_K, 1, 0, ARCH_IDS[arch]),
        _ins(_BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        _ins(_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == "x86_64":  # x32 ABI syscalls carry bit 30
        prog += [
            _ins(_BPF_JGE_K, 0, 1, 0x40000000),
            _ins(_BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        ]
    rules = _rules(arch, nr, allow_inet, ip_only, no_spawn, allowlist, nest)
    default = "enosys" if allowlist else "allow"
    runs: list[tuple[int, str]] = []  # (first number, verdict) of each run of equal verdicts
    for number in range(max(rules) + 2):
        verdict = rules.get(number, default)
        if not runs or runs[-1][1] != verdict:
            runs.append((number, verdict))
    body: list[_Op] = []
    _search(runs, body)
    return b"".join(prog) + _assemble(body)


def _rules(
    arch: str,
    nr: dict[str, int],
    allow_inet: bool,
    ip_only: bool,
    no_spawn: bool,
    allowlist: bool,
    nest: bool = False,
) -> dict[int, str]:
    """The verdict of each syscall number with a rule: a plain one, or an argument check's."""
    rules: dict[int, str] = {}
    if allowlist:
        rules.update((nr[name], "allow") for name in allowed_calls(arch) if name in nr)
        rules[nr["personality"]] = "personality"
    deny = [n for n in (*DENY_COMMON, "iopl", "ioperm") if n in nr]
    if no_spawn:
        deny += [n for n in (*DENY_SPAWN, "clone") if n in nr]
    rules.update((nr[name], "eperm") for name in deny)  # the dangerous ones win
    rules[nr["clone3"]] = "enosys"  # (glibc falls back to clone, whose flags we can read)
    if rules.get(nr["clone"]) != "eperm":
        rules[nr["clone"]] = "clone"
    if nest:
        rules.update((nr[name], "allow") for name in NEST_CALLS)
    if not allow_inet or ip_only:
        for name in ("socket", "socketpair"):
            rules[nr[name]] = "ip" if allow_inet else "unix"
    return rules


#: One instruction of a program being built: ``(label, code, k, jump if true, if false)``;
#: a jump names the label it goes to (``""``: the next instruction) or skips a count.
_Op = tuple[str, int, int, "str | int", "str | int"]
_VERDICTS = {
    "allow": SECCOMP_RET_ALLOW,
    "eperm": SECCOMP_RET_ERRNO | errno.EPERM,
    "enosys": SECCOMP_RET_ERRNO | errno.ENOSYS,
    "eafnosupport": SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT,
}
#: The rules that read an argument (``seccomp_data.args[0]``, its low 32 bits): the values
#: it may take, and what any other value gets.
_ALLOWED_VALUES: dict[str, tuple[tuple[int, ...], str]] = {
    # socket(domain, ...) and socketpair: AF_UNIX only
    "unix": ((AF_UNIX,), "eafnosupport"),
    # a service's: AF_INET and AF_INET6 too (TCP/UDP on its own loopback), no netlink or packet
    "ip": ((AF_UNIX, AF_INET, AF_INET6), "eafnosupport"),
    # personality(persona): Docker's values; any other persona is refused as an unknown call
    # is (ENOSYS; libseccomp, the differential test's reference, cannot say "else EPERM")
    "personality": (PERSONALITIES, "enosys"),
}


def _verdict_block(verdict: str) -> list[_Op]:
    """The instructions that end a search leaf: a return, or an argument check and its returns.

    Inline, not shared at the end: a program of a few hundred instructions would put shared
    verdicts beyond a classic-BPF jump's reach (255).
    """
    ret = _BPF_RET_K
    if verdict in _VERDICTS:
        return [("", ret, _VERDICTS[verdict], "", "")]
    if verdict == "clone":  # clone(flags, ...): no new namespaces
        return [
            ("", _BPF_LD_W_ABS, 16, "", ""),
            ("", _BPF_JSET_K, CLONE_NEW_MASK, 1, 0),
            ("", ret, _VERDICTS["allow"], "", ""),
            ("", ret, _VERDICTS["eperm"], "", ""),
        ]
    values, refusal = _ALLOWED_VALUES[verdict]
    block: list[_Op] = [("", _BPF_LD_W_ABS, 16, "", "")]
    for i, value in enumerate(values):
        block.append(("", _BPF_JEQ_K, value, len(values) - 1 - i, int(i == len(values) - 1)))
    return [*block, ("", ret, _VERDICTS["allow"], "", ""), ("", ret, _VERDICTS[refusal], "", "")]


def _search(runs: list[tuple[int, str]], out: list[_Op]) -> None:
    """A binary search over the runs of numbers with one verdict (sorted by first number),
    each leaf ending in its verdict's block.

    A linear chain of comparisons costs every syscall all of them, and the kernel runs the
    program once per syscall number to fill its action cache each time a box loads it: the
    search decides a number in ~9 comparisons where a chain of the allowlist would take ~300.
    """
    if len(runs) == 1:
        out += _verdict_block(runs[0][1])
        return
    half = len(runs) // 2
    upper = f"ge{runs[half][0]}"
    out.append(("", _BPF_JGE_K, runs[half][0], upper, ""))
    _search(runs[:half], out)
    start = len(out)
    _search(runs[half:], out)
    out[start] = (upper, *out[start][1:])


def _assemble(ops: list[_Op]) -> bytes:
    """The program's bytes, each jump resolved to its label's offset (forward, < 256)."""
    where = {label: i for i, (label, *_) in enumerate(ops) if label}
    code = []
    for i, (_label, op, k, if_true, if_false) in enumerate(ops):
        jt, jf = (
            to if isinstance(to, int) else (where[to] - i - 1 if to else 0)
            for to in (if_true, if_false)
        )
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise ValueError(f"a jump from {i} out of classic BPF's reach")
        code.append(_ins(op, jt, jf, k))
    return b"".join(code)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class PreparedFilter(bytes):
    """A filter program whose ``struct sock_fprog`` is already in C memory.

    The master prepares its filters once; every box, a fresh fork, then loads one with a
    single call: making the ctypes buffer and structure there cost it ~0.1 ms of pages
    copied on first touch (``benchmarks/box_cost.py``). It is still the program's bytes.

    >>> ready = PreparedFilter(build_seccomp_filter("x86_64"))
    >>> ready == build_seccomp_filter("x86_64"), ready.address > 0
    (True, True)
    """

    address: int
    _buffer: ctypes.Array[ctypes.c_char]
    _fprog: _SockFprog

    def __new__(cls, program: bytes) -> PreparedFilter:
        self = super().__new__(cls, program)
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // 8, ctypes.addressof(self._buffer))
        self.address = ctypes.addressof(self._fprog)
        return self


def load_seccomp(program: bytes) -> None:
    """Install ``program`` on the calling thread (needs no_new_privs or CAP_SYS_ADMIN)."""
    ready = program if isinstance(program, PreparedFilter) else PreparedFilter(program)
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ready.address)
