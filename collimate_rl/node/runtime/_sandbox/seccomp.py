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

#: Process creation, denied too for a process that must never start one (``no_spawn``).
DENY_SPAWN = ["fork", "vfork", "execve", "execveat"]

#: Syscalls denied outright, with EPERM (numbers per architecture).
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

SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "socket": 41,
        "socketpair": 53,
        "clone": 56,
        "clone3": 435,
        "ptrace": 101,
        "syslog": 103,
        "pivot_root": 155,
        "chroot": 161,
        "acct": 163,
        "mount": 165,
        "umount2": 166,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "iopl": 172,
        "ioperm": 173,
        "init_module": 175,
        "delete_module": 176,
        "quotactl": 179,
        "lookup_dcookie": 212,
        "kexec_load": 246,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "unshare": 272,
        "perf_event_open": 298,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
        "setns": 308,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "kcmp": 312,
        "finit_module": 313,
        "kexec_file_load": 320,
        "bpf": 321,
        "userfaultfd": 323,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "quotactl_fd": 443,
        "open_tree_attr": 467,
        "fork": 57,
        "vfork": 58,
        "execve": 59,
        "execveat": 322,
    },
    "aarch64": {
        "lookup_dcookie": 18,
        "umount2": 39,
        "mount": 40,
        "pivot_root": 41,
        "chroot": 51,
        "quotactl": 60,
        "acct": 89,
        "unshare": 97,
        "kexec_load": 104,
        "init_module": 105,
        "delete_module": 106,
        "syslog": 116,
        "ptrace": 117,
        "reboot": 142,
        "socket": 198,
        "socketpair": 199,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "clone": 220,
        "swapon": 224,
        "swapoff": 225,
        "perf_event_open": 241,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
        "setns": 268,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "kcmp": 272,
        "finit_module": 273,
        "bpf": 280,
        "userfaultfd": 282,
        "kexec_file_load": 294,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "clone3": 435,
        "mount_setattr": 442,
        "quotactl_fd": 443,
        "open_tree_attr": 467,
        "execve": 221,
        "execveat": 281,
    },
}

ARCH_IDS = {"x86_64": AUDIT_ARCH_X86_64, "aarch64": AUDIT_ARCH_AARCH64}


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def build_seccomp_filter(
    arch: str | None = None,
    *,
    allow_inet: bool = False,
    ip_only: bool = False,
    no_spawn: bool = False,
) -> bytes:
    """Return the raw BPF program (``struct sock_filter[]``) for ``arch``.

    Denied: sockets other than AF_UNIX (EAFNOSUPPORT, unless ``allow_inet``;
    with ``ip_only`` too, AF_INET/AF_INET6 are allowed, every other family not),
    clone with any CLONE_NEW* flag (EPERM), clone3 (ENOSYS, glibc falls back
    to clone), and the syscalls in ``DENY_COMMON`` plus iopl/ioperm (EPERM).
    With ``no_spawn`` (a node worker, which never starts a process) every
    ``clone`` and the syscalls in ``DENY_SPAWN`` are denied too (EPERM).
    A foreign architecture or an x32 syscall kills the process.
    """
    arch = arch or os.uname().machine
    if arch not in SYSCALLS:
        raise OSError(errno.ENOSYS, f"no seccomp table for architecture {arch}")
    nr = SYSCALLS[arch]
    errno_perm = SECCOMP_RET_ERRNO | errno.EPERM
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
    deny = [n for n in DENY_COMMON if n in nr]
    deny += [n for n in ("iopl", "ioperm") if n in nr]
    if no_spawn:
        deny += [n for n in (*DENY_SPAWN, "clone") if n in nr]
    # what each syscall number with a rule gets: a verdict, or a block that reads an argument
    rules: dict[int, str] = {nr[name]: "eperm" for name in deny}
    rules.setdefault(nr["clone3"], "enosys")
    rules.setdefault(nr["clone"], "clone")
    if not allow_inet or ip_only:
        for name in ("socket", "socketpair"):
            rules.setdefault(nr[name], "ip" if allow_inet else "unix")
    body: list[_Op] = []
    _search(sorted(rules), rules, body)
    for name, block in _ARGUMENT_CHECKS.items():
        if name in rules.values():
            body += block
    body += [  # the verdicts last: classic BPF jumps only forward
        ("allow", _BPF_RET_K, SECCOMP_RET_ALLOW, "", ""),
        ("eperm", _BPF_RET_K, errno_perm, "", ""),
        ("enosys", _BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS, "", ""),
        ("eafnosupport", _BPF_RET_K, SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT, "", ""),
    ]
    return b"".join(prog) + _assemble(body)


#: One instruction of a program being built: ``(label, code, k, jump if true, if false)``;
#: a jump names the label it goes to, ``""`` the next instruction.
_Op = tuple[str, int, int, str, str]
#: The rules that read an argument (``seccomp_data.args[0]``, its low 32 bits).
_ARGUMENT_CHECKS: dict[str, list[_Op]] = {
    # clone(flags, ...): no new namespaces
    "clone": [
        ("clone", _BPF_LD_W_ABS, 16, "", ""),
        ("", _BPF_JSET_K, CLONE_NEW_MASK, "eperm", "allow"),
    ],
    # socket(domain, ...) and socketpair: AF_UNIX only
    "unix": [
        ("unix", _BPF_LD_W_ABS, 16, "", ""),
        ("", _BPF_JEQ_K, AF_UNIX, "allow", "eafnosupport"),
    ],
    # a service's: AF_INET and AF_INET6 too (TCP/UDP on its own loopback), no netlink or packet
    "ip": [
        ("ip", _BPF_LD_W_ABS, 16, "", ""),
        ("", _BPF_JEQ_K, AF_UNIX, "allow", ""),
        ("", _BPF_JEQ_K, AF_INET, "allow", ""),
        ("", _BPF_JEQ_K, AF_INET6, "allow", "eafnosupport"),
    ],
}
#: Numbers a leaf of the search compares in turn (a branch costs one instruction too).
_LEAF = 3


def _search(keys: list[int], rules: dict[int, str], out: list[_Op]) -> None:
    """A binary search over the sorted ``keys``: each goes to its rule, any other number is
    allowed.

    A linear chain of comparisons costs every allowed syscall all of them, and the kernel
    runs the program once per syscall number to fill its action cache each time a box loads
    it: a search takes ~7 comparisons where the chain took ~50.
    """
    if len(keys) <= _LEAF:
        for i, key in enumerate(keys):
            out.append(("", _BPF_JEQ_K, key, rules[key], "allow" if i == len(keys) - 1 else ""))
        return
    half = len(keys) // 2
    upper = f"ge{keys[half]}"
    out.append(("", _BPF_JGE_K, keys[half], upper, ""))
    _search(keys[:half], rules, out)
    start = len(out)
    _search(keys[half:], rules, out)
    out[start] = (upper, *out[start][1:])


def _assemble(ops: list[_Op]) -> bytes:
    """The program's bytes, each jump resolved to its label's offset (forward, < 256)."""
    where = {label: i for i, (label, *_) in enumerate(ops) if label}
    code = []
    for i, (_label, op, k, if_true, if_false) in enumerate(ops):
        jt, jf = (where[to] - i - 1 if to else 0 for to in (if_true, if_false))
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
