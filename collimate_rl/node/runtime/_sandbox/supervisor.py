"""The in-sandbox supervisor: template master, session servers, exec children.

This file runs *inside* the sandbox under the sandbox's own Python, so it is
stdlib-only and Python 3.10+ compatible. It is also imported on the host (for
tests and for the ``none`` driver), so importing it has no side effects.

Process model (``bwrap`` driver)::

    bwrap (host uid = sandbox uid, its own user/pid/net/ipc/uts/mount ns)
      master            fork-server, preloads the template's modules, subreaper
        session server  pid 1 of its own user/pid/net/ipc/mount namespaces,
                        owns a size-limited tmpfs with its overlay layers
          factory F     forked before the server reads any request; hidden
                        /.collimate, no capabilities, no_new_privs, seccomp,
                        non-dumpable; forks warm pristine processes on demand
          exec child    private mount ns with /.collimate hidden, rlimits,
                        no capabilities, no_new_privs, seccomp; runs the exec

The factory (``factory.py``, loaded from next to this file) lets an exec get
a warm Python process that never saw any request: the exec's files are in
the exec child's memory (and in the server's), so a fork of either is not
clean. Every exec gets fd ``ZYGOTE_FD`` (4), named by ``COLLIMATE_ZYGOTE_FD``:
its own ``SOCK_SEQPACKET`` connection to F (a socketpair the server makes per
exec and hands to F over their control socket by SCM_RIGHTS). Protocol: one
JSON request ``{"op": "spawn", "seed", "env", "code": "source"|"marshal",
"tag"}`` with the new process's fds 0..4 attached; reply ``{"ok", "pid",
"marshal"}``; then the exec writes the program to the new fd 0 and closes it
(see ``factory.py``). The post-exec sweep kills every process but the server
and F. F is never re-created (a fork of a server that has read requests is
not pristine): if it dies, later execs of the session get no
``COLLIMATE_ZYGOTE_FD`` and callers fall back to a fresh interpreter. The
``none`` driver has no F.

A fork of session P into children C1..Cn is done by the master: each child
joins P's user and mount namespaces (the master owns them), drops P's
/sandbox and /tmp mounts, then creates fresh namespaces and stacks an overlay
over P's frozen layers. The children's pid namespaces are siblings of P's, so
P's sweeps and P's death never touch them.

Wire format on every unix socket: a frame is a 4-byte big-endian length and a
JSON object; a header may announce ``payload_len`` raw bytes that follow it.
"""

# ruff: noqa: SIM105, SIM115
# (plain try/except/pass and explicit fd handling: this code runs in fork
# children and on the exec hot path)
from __future__ import annotations

import ctypes
import errno
import importlib
import importlib.util
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from typing import Any


def _load_sibling(name: str) -> Any:
    """A module from this directory: a relative import in the package, by path as a script.

    Run as a script, ``-I`` keeps our own directory off ``sys.path``, so the
    siblings are loaded from their files (once; cached as ``collimate_<name>``).
    """
    if __package__:
        return importlib.import_module(f".{name}", __package__)
    key = f"collimate_{name}"
    if key not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        spec = importlib.util.spec_from_file_location(key, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


zygote = _load_sibling("factory")
svc = _load_sibling("service")

# --------------------------------------------------------------------------
# Linux constants and thin ctypes wrappers
# --------------------------------------------------------------------------

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEW_MASK = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522

#: The fd (and the env var naming it) of an exec's connection to the factory.
ZYGOTE_FD = 4
ZYGOTE_ENV = "COLLIMATE_ZYGOTE_FD"

#: Paths inside the container (``bwrap`` driver).
INTERNAL_DIR = "/.collimate"
SANDBOX_DIR = "/sandbox"
SITE_DIR = "/opt/collimate/site"
BIN_DIR = "/opt/collimate/bin"

_libc: Any = None


def libc() -> Any:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.mount.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_char_p,
        ]
        lib.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.unshare.argtypes = [ctypes.c_int]
        lib.setns.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
        lib.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        _libc = lib
    return _libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(libc().unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(libc().setns(fd, nstype), "setns")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(
        libc().mount(
            src.encode() if src is not None else None,
            target.encode(),
            fstype.encode() if fstype is not None else None,
            flags,
            data.encode() if data is not None else None,
        ),
        f"mount {target}",
    )


def umount2(target: str, flags: int) -> None:
    _check(libc().umount2(target.encode(), flags), f"umount {target}")


_SYS_CLONE = {"x86_64": 56, "aarch64": 220}


def clone_process(flags: int) -> int:
    """fork(2) into new namespaces in one step (a raw ``clone`` with ``flags``).

    Returns like ``os.fork()``. Only for single-threaded callers; the child
    must not rely on glibc's cached tid (it only forks and execs later, and
    ``os.fork`` there refreshes everything).
    """
    lib = libc()
    nr = _SYS_CLONE.get(os.uname().machine)
    if nr is None:
        raise OSError(errno.ENOSYS, "clone: unsupported architecture")
    fn = lib.syscall
    fn.restype = ctypes.c_long
    fn.argtypes = [ctypes.c_long] + [ctypes.c_ulong] * 5
    pid = int(fn(nr, flags | signal.SIGCHLD, 0, 0, 0, 0))
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"clone: {os.strerror(err)}")
    return pid


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    rc: int = libc().prctl(option, arg2, arg3, arg4, arg5)
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")
    return rc


# --------------------------------------------------------------------------
# seccomp: a BPF program generated here, no libseccomp
# --------------------------------------------------------------------------

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

#: Syscalls denied outright, with EPERM (numbers per architecture).
_DENY_COMMON = [
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
    },
}

_ARCH_IDS = {"x86_64": AUDIT_ARCH_X86_64, "aarch64": AUDIT_ARCH_AARCH64}


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def build_seccomp_filter(
    arch: str | None = None, *, allow_inet: bool = False, ip_only: bool = False
) -> bytes:
    """Return the raw BPF program (``struct sock_filter[]``) for ``arch``.

    Denied: sockets other than AF_UNIX (EAFNOSUPPORT, unless ``allow_inet``;
    with ``ip_only`` too, AF_INET/AF_INET6 are allowed, every other family not),
    clone with any CLONE_NEW* flag (EPERM), clone3 (ENOSYS, glibc falls back
    to clone), and the syscalls in ``_DENY_COMMON`` plus iopl/ioperm (EPERM).
    A foreign architecture or an x32 syscall kills the process.
    """
    arch = arch or os.uname().machine
    if arch not in SYSCALLS:
        raise OSError(errno.ENOSYS, f"no seccomp table for architecture {arch}")
    nr = SYSCALLS[arch]
    errno_perm = SECCOMP_RET_ERRNO | errno.EPERM
    prog: list[bytes] = [
        _ins(_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _ins(_BPF_JEQ_K, 1, 0, _ARCH_IDS[arch]),
        _ins(_BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        _ins(_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == "x86_64":  # x32 ABI syscalls carry bit 30
        prog += [
            _ins(_BPF_JGE_K, 0, 1, 0x40000000),
            _ins(_BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        ]
    deny = [n for n in _DENY_COMMON if n in nr]
    deny += [n for n in ("iopl", "ioperm") if n in nr]
    for name in deny:
        prog += [_ins(_BPF_JEQ_K, 0, 1, nr[name]), _ins(_BPF_RET_K, 0, 0, errno_perm)]
    prog += [
        _ins(_BPF_JEQ_K, 0, 1, nr["clone3"]),
        _ins(_BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
    ]
    # clone(flags, ...): refuse new namespaces. Each block reloads nr after.
    prog += [
        _ins(_BPF_JEQ_K, 0, 4, nr["clone"]),
        _ins(_BPF_LD_W_ABS, 0, 0, 16),  # args[0], low 32 bits
        _ins(_BPF_JSET_K, 0, 1, CLONE_NEW_MASK),
        _ins(_BPF_RET_K, 0, 0, errno_perm),
        _ins(_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    if allow_inet and ip_only:  # a service: TCP/UDP on its own loopback, no netlink/packet
        for name in ("socket", "socketpair"):
            prog += [
                _ins(_BPF_JEQ_K, 0, 6, nr[name]),
                _ins(_BPF_LD_W_ABS, 0, 0, 16),  # domain
                _ins(_BPF_JEQ_K, 3, 0, AF_UNIX),
                _ins(_BPF_JEQ_K, 2, 0, AF_INET),
                _ins(_BPF_JEQ_K, 1, 0, AF_INET6),
                _ins(_BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT),
                _ins(_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
            ]
    if not allow_inet:
        for name in ("socket", "socketpair"):
            prog += [
                _ins(_BPF_JEQ_K, 0, 4, nr[name]),
                _ins(_BPF_LD_W_ABS, 0, 0, 16),  # domain
                _ins(_BPF_JEQ_K, 0, 1, AF_UNIX),
                _ins(_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
                _ins(_BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT),
            ]
    prog.append(_ins(_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_seccomp(program: bytes) -> None:
    """Install ``program`` on the calling thread (needs no_new_privs or CAP_SYS_ADMIN)."""
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_bounding_set(cap_last: int) -> None:
    """Empty the capability bounding set (inherited by every later fork)."""
    for cap in range(cap_last + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError as exc:  # EINVAL: unknown to this kernel
            if exc.errno != errno.EINVAL:
                raise


def drop_all_capabilities(cap_last: int, *, bounding: bool = True) -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets.

    ``bounding=False`` when the bounding set is already empty (the session
    server empties it once at start-up; that saves ~40 prctl calls per exec).
    """
    if bounding:
        drop_bounding_set(cap_last)
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    hdr = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc().capset(ctypes.addressof(hdr), ctypes.addressof(data)), "capset")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def hide_internals_and_drop_capabilities(cap_last: int) -> None:
    """Harden a process that will run sandbox code (an exec, the factory, a service).

    In a private mount namespace the node's internal folder becomes an empty,
    read-only tmpfs, then every capability is dropped (the bounding set stays:
    it is the session's). The caller loads its seccomp filter last.
    """
    unshare(CLONE_NEWNS)
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    mount("none", INTERNAL_DIR, "tmpfs", flags, "size=4k,mode=0555")
    drop_all_capabilities(cap_last, bounding=False)


def _cap_last() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except OSError:
        return 63


# --------------------------------------------------------------------------
# framing
# --------------------------------------------------------------------------


def send_msg(sock: socket.socket, header: dict[str, Any], payload: bytes = b"") -> None:
    if payload:
        header = dict(header, payload_len=len(payload))
    data = json.dumps(header).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)
    if payload:
        sock.sendall(payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("peer closed")
        buf += chunk
    return bytes(buf)


def recv_msg(sock: socket.socket) -> tuple[dict[str, Any], bytes]:
    (n,) = struct.unpack(">I", _recv_exact(sock, 4))
    header: dict[str, Any] = json.loads(_recv_exact(sock, n))
    plen = int(header.get("payload_len", 0))
    payload = _recv_exact(sock, plen) if plen else b""
    return header, payload


# --------------------------------------------------------------------------
# exec child
# --------------------------------------------------------------------------


def _format_timeout(seconds: float) -> bytes:
    return f"timeout after {float(seconds)}s".encode()


class _NumpySeeder:
    """A meta-path hook: seeds numpy's legacy global RNG when it is imported."""

    def __init__(self, words: list[int]) -> None:
        self.words = words

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "numpy.random":
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _SeedingLoader(spec.loader, self.words)
                return spec
        return None


class _SeedingLoader:
    def __init__(self, inner: Any, words: list[int]) -> None:
        self._inner = inner
        self._words = words

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        module.seed(self._words)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def seed_words(seed: str) -> list[int]:
    """The 256-bit seed as eight uint32 words, most significant first.

    numpy's legacy ``seed()`` gets these; Python's ``random.seed(int)`` uses
    the same words least significant first, so the two streams differ.
    """
    value = int(seed, 16)
    return [(value >> (32 * i)) & 0xFFFFFFFF for i in reversed(range(8))]


def apply_python_seed(seed: str) -> None:
    import random

    random.seed(int(seed, 16))
    words = seed_words(seed)
    npr = sys.modules.get("numpy.random")
    if npr is not None:
        npr.seed(words)
    else:
        sys.meta_path.insert(0, _NumpySeeder(words))


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _run_code_inprocess(path: str, env: dict[str, str], sandbox: str) -> int:

    # as a fresh interpreter would have them
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        source = fh.read()
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    sys.argv = [path]
    user_site = os.path.join(
        env.get("PYTHONUSERBASE", os.path.join(sandbox, ".local")),
        "lib",
        f"python{sys.version_info[0]}.{sys.version_info[1]}",
        "site-packages",
    )
    extra = [sandbox]
    if os.path.isdir(user_site):
        extra.append(user_site)
    sys.path[:0] = extra
    return int(zygote.run_as_main(source, path))


def apply_limits(lim: dict[str, Any]) -> None:
    """Set the exec's rlimits (soft = hard = the limit, capped by the hard limit)."""
    import resource

    for res, value in (
        (resource.RLIMIT_CPU, lim["cpu_seconds"]),
        (resource.RLIMIT_AS, lim["address_space_bytes"]),
        (resource.RLIMIT_NPROC, lim["processes"]),
        (resource.RLIMIT_FSIZE, lim["file_size_bytes"]),
        (resource.RLIMIT_NOFILE, lim["open_files"]),
        (resource.RLIMIT_CORE, 0),
    ):
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            _soft, hard = resource.getrlimit(res)
            resource.setrlimit(res, (min(value, hard) if hard >= 0 else value, hard))


def _run_argv(argv: list[str], env: dict[str, str]) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            os.execvpe(argv[0], argv, env)
        except FileNotFoundError:
            _write_all(2, f"{argv[0]}: command not found\n".encode())
            os._exit(127)
        except BaseException as exc:
            _write_all(2, f"{argv[0]}: {exc}\n".encode())
            os._exit(126)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


class ExecJob:
    """Everything the exec child needs (decoded from the request)."""

    def __init__(self, header: dict[str, Any], payload: bytes | bytearray) -> None:
        self._raw = payload
        self.seed: str = header["seed"]
        self.timeout: float = float(header["timeout"])
        self.command: str | None = header.get("command")
        self.commands: list[list[str]] | None = header.get("commands")
        self.code: str | None = header.get("code")
        self.env: list[list[str]] = header.get("env") or []
        self.files: list[tuple[str, bytes | bytearray]] = []
        pos = 0
        for path, size in header.get("files") or []:
            self.files.append((path, payload[pos : pos + size]))
            pos += size

    def drop_payload(self) -> None:
        """Zero and forget the request payload (the files' contents).

        Defense in depth only: copies the interpreter made on the way (socket
        reads, freed buffers) are not zeroed, which is why the factory exists.
        """
        for _path, data in self.files:
            if isinstance(data, bytearray):
                data[:] = bytes(len(data))
        self.files = []
        if isinstance(self._raw, bytearray):
            self._raw[:] = bytes(len(self._raw))
        self._raw = b""


def exec_child(
    sv: SessionServer,
    sock: socket.socket,
    job: ExecJob,
    out_w: int,
    ack_w: int,
    devnull: int,
    zfd: int = -1,
) -> None:  # pragma: no cover - runs in a forked child
    """Runs in the forked exec child; never returns."""
    rc = 126
    try:
        sock.close()
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGPIPE, signal.SIGTERM, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        os.setsid()
        if not sv.isolated:  # no pid namespace ends it with its server: die with it
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        sv.close_fds()
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        os.dup2(ack_w, 3)
        if zfd >= 0:  # a connection to the session's factory (see factory.py)
            os.dup2(zfd, ZYGOTE_FD)
            os.closerange(ZYGOTE_FD + 1, 1 << 16)
        else:
            os.closerange(4, 1 << 16)
        os.set_inheritable(3, False)
        cfg = sv.cfg
        sandbox = sv.sandbox_dir
        if sv.isolated:
            hide_internals_and_drop_capabilities(sv.cap_last)
            load_seccomp(sv.seccomp)
        apply_limits(cfg["limits"])
        os.umask(0o022)
        os.chdir(sandbox)
        for path, data in job.files:
            full = path if os.path.isabs(path) else os.path.join(sandbox, path)
            parent = os.path.dirname(full)
            if parent:
                os.makedirs(parent, exist_ok=True)
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            del data
        job.drop_payload()  # defense in depth only: freed memory is not zeroed
        env = dict(sv.base_env)
        env.update({k: v for k, v in cfg.get("env") or []})
        env.update({k: v for k, v in job.env})
        env["COLLIMATE_SEED"] = job.seed
        if zfd >= 0:
            env[ZYGOTE_ENV] = str(ZYGOTE_FD)
        if job.command is not None:
            os.environ.clear()
            os.environ.update(env)
            _write_all(3, job.seed.encode())
            os.close(3)
            os.execve("/bin/sh", ["sh", "-c", job.command], env)
        if job.commands is not None:
            os.environ.clear()
            os.environ.update(env)
            _write_all(3, job.seed.encode())
            os.close(3)
            rc = 0
            for argv in job.commands:
                if not argv:
                    continue
                rc = _run_argv(list(argv), env)
                if rc != 0:
                    break
            os._exit(rc & 0xFF if rc >= 0 else 128 - rc)
        code = job.code or ""
        code_path = os.path.join(sv.tmp_dir, f"colcode_{os.getpid()}.py")
        with open(code_path, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(code)
        env["COLLIMATE_CODE_FILE"] = code_path
        os.environ.clear()
        os.environ.update(env)
        interp = cfg.get("interpreter", "python3")
        if interp == "python3":
            apply_python_seed(job.seed)
            _write_all(3, job.seed.encode())
            os.close(3)
            rc = _run_code_inprocess(code_path, env, sandbox)
            try:
                os.unlink(code_path)
            except OSError:
                pass
            os._exit(rc)
        _write_all(3, job.seed.encode())
        os.close(3)
        os.execvpe(interp, [interp, code_path], env)
    except BaseException as exc:
        try:
            _write_all(2, f"collimate: exec setup failed: {exc!r}\n".encode())
        except BaseException:
            pass
        os._exit(rc)
    os._exit(rc)


# --------------------------------------------------------------------------
# session server
# --------------------------------------------------------------------------


class _Exec:
    def __init__(
        self, pid: int, conn: socket.socket, out_r: int, ack_r: int, job: ExecJob, cap: int
    ) -> None:
        self.pid = pid
        self.conn = conn
        self.out_r = out_r
        self.ack_r = ack_r
        self.job = job
        self.cap = cap
        self.t0 = time.monotonic()
        self.deadline = self.t0 + job.timeout
        self.output = bytearray()
        self.timed_out = False
        self.truncated = False
        self.status: int | None = None
        self.cancelled = False
        self.t_end = 0.0
        self.out_open = True


class _Conn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.need_header: int | None = None
        self.header: dict[str, Any] | None = None


class SessionServer:
    """Serves one session's execs on a unix socket (single-threaded loop)."""

    def __init__(
        self,
        cfg: dict[str, Any],
        lsock: socket.socket,
        *,
        isolated: bool,
        sandbox_dir: str,
        tmp_dir: str,
        layer_dir: str | None,
        lowers: list[str],
        gen: int,
    ) -> None:
        self.cfg = cfg
        self.lsock = lsock
        self.isolated = isolated
        self.sandbox_dir = sandbox_dir
        self.tmp_dir = tmp_dir
        self.layer_dir = layer_dir
        self.lowers = lowers
        self.gen = gen
        self.cap_last = _cap_last()
        self.seccomp = bytes(cfg.get("_seccomp") or b"") if isolated else b""
        if isolated:
            drop_bounding_set(self.cap_last)
        self.execs: dict[int, _Exec] = {}
        self.conns: dict[int, _Conn] = {}
        self.stopping = False
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        self.base_env: dict[str, str] = dict(cfg.get("base_env") or {})
        self.factory_pid = 0  # the pristine factory F (factory.py), 0 when none
        self.factory_ctl: socket.socket | None = None
        self.service_pid = 0  # the service keeper K (service.py), 0 when none

    # -- the pristine factory F
    def start_factory(self) -> None:
        """Fork F; only before this server has read any request (F must be pristine).

        F is never re-created: a later fork of this server could carry earlier
        requests in its (freed, not zeroed) memory. If F dies, execs get no
        ``COLLIMATE_ZYGOTE_FD`` and callers fall back to a fresh interpreter.
        """
        if not self.isolated or self.factory_pid:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - F
            os.close(ready_r)
            ours.close()
            self._factory_main(theirs, ready_w)
        os.close(ready_w)
        theirs.close()
        try:
            ok = os.read(ready_r, 16) == b"ok"
        finally:
            os.close(ready_r)
        if not ok:
            ours.close()
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            return
        ours.setblocking(False)
        self.factory_pid = pid
        self.factory_ctl = ours

    def _factory_main(self, ctl: socket.socket, ready_w: int) -> None:  # pragma: no cover
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            os.setsid()
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            self.close_fds()
            for fd in (0, 1, 2):
                os.dup2(self.devnull, fd)
            # F keeps 0..3 taken (see factory.Factory._child); both fds are > 4
            os.dup2(ctl.detach(), 3)
            os.set_inheritable(3, False)
            os.closerange(4, ready_w)
            os.closerange(ready_w + 1, 1 << 16)
            hide_internals_and_drop_capabilities(self.cap_last)
            prctl(PR_SET_DUMPABLE, 0)
            load_seccomp(self.seccomp)
            os.chdir(self.sandbox_dir)
            factory = zygote.Factory(socket.socket(fileno=3), self._prepare_spawned)
            os.write(ready_w, b"ok")
            os.close(ready_w)
        except BaseException:
            os._exit(1)
        try:
            factory.serve()
        finally:
            os._exit(0)

    def _prepare_spawned(self, seed: str, extra: dict[str, str]) -> None:  # pragma: no cover
        """In a process F spawned: the exec's limits, cwd, env and seeding.

        It becomes dumpable again (F is not), as a freshly exec'd interpreter
        would be: its memory is a copy of F's, and /proc/self/mem works.
        """
        prctl(PR_SET_DUMPABLE, 1)
        apply_limits(self.cfg["limits"])
        os.umask(0o022)
        os.chdir(self.sandbox_dir)
        env = dict(self.base_env)
        env.update({k: v for k, v in self.cfg.get("env") or []})
        env.update(extra)
        env.pop(ZYGOTE_ENV, None)
        env["COLLIMATE_SEED"] = seed
        os.environ.clear()
        os.environ.update(env)
        apply_python_seed(seed)

    def _factory_conn(self) -> socket.socket | None:
        """A new connection to F for one exec (its end for the exec), or None."""
        if not self.factory_pid or self.factory_ctl is None:
            return None
        try:
            gone = os.waitpid(self.factory_pid, os.WNOHANG)[0] != 0
        except ChildProcessError:
            gone = True
        if gone:
            self._factory_died()
            return None
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self.factory_ctl, [b"c"], [theirs.fileno()])
        except OSError:  # F is gone or wedged: never block the server on it
            mine.close()
            return None
        finally:
            theirs.close()
        return mine

    # -- the service keeper K
    def start_service(self, key: str, sock_dir: str) -> None:
        """Fork K (service.py) when the template declares a service; after F, before requests.

        Privileged steps first (bind the relay sockets in the host-shared
        directory, bring loopback up), then K hardens itself like an exec,
        with AF_INET allowed and no CPU-time limit, and starts the command.
        Raises if K does not come up, failing the session's bring-up.
        """
        spec = self.cfg.get("service")
        if not self.isolated or not spec or self.service_pid:
            return
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - K
            os.close(ready_r)
            self._service_main(spec, key, sock_dir, ready_w)
        os.close(ready_w)
        try:
            reply = os.read(ready_r, 4096)
        finally:
            os.close(ready_r)
        if reply != b"ok":
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            _unlink_service_files(sock_dir, key)
            raise OSError(f"service keeper failed: {reply.decode(errors='replace') or 'died'}")
        self.service_pid = pid

    def _service_main(
        self, spec: dict[str, Any], key: str, sock_dir: str, ready_w: int
    ) -> None:  # pragma: no cover - K
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            os.setsid()
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            self.close_fds()
            for fd in (0, 1, 2):
                os.dup2(self.devnull, fd)
            # nothing of the server's may stay open here (the master reads the
            # session's start-up pipe until EOF)
            keep = {ready_w, self.devnull}
            for name in os.listdir("/proc/self/fd"):
                if int(name) > 2 and int(name) not in keep:
                    try:
                        os.close(int(name))
                    except OSError:
                        pass
            listeners = svc.bind_listeners(sock_dir, key, [int(p) for p in spec["ports"]])
            dir_fd = os.open(sock_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            log_fd = os.open(
                f"{key}.svc.log",
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW,
                0o644,
                dir_fd=dir_fd,
            )
            svc.loopback_up()
            hide_internals_and_drop_capabilities(self.cap_last)
            load_seccomp(bytes(self.cfg["_seccomp_inet"]))
            import resource

            apply_limits(dict(self.cfg["limits"], cpu_seconds=resource.RLIM_INFINITY))
            os.umask(0o022)
            os.chdir(self.sandbox_dir)
            env = svc.service_env(self.base_env, list(self.cfg.get("env") or []))
            keeper = svc.Keeper(
                listeners,
                argv=["/bin/sh", "-c", str(spec["cmd"])],
                env=env,
                cwd=self.sandbox_dir,
                log_fd=log_fd,
                dir_fd=dir_fd,
                exit_name=f"{key}.svc.exit",
                devnull=self.devnull,
                in_child=_die_with_parent,
            )
            os.write(ready_w, b"ok")
            os.close(ready_w)
        except BaseException as exc:
            try:
                os.write(ready_w, f"{type(exc).__name__}: {exc}".encode())
            except BaseException:
                pass
            os._exit(1)
        try:
            keeper.run()
        finally:
            os._exit(0)

    def _factory_died(self) -> None:
        self.factory_pid = 0
        if self.factory_ctl is not None:
            self.factory_ctl.close()
            self.factory_ctl = None

    # -- fds a forked exec child must not keep
    def close_fds(self) -> None:
        for conn in list(self.conns.values()):
            conn.sock.close()
        for ex in self.execs.values():
            ex.conn.close()
        if self.factory_ctl is not None:
            self.factory_ctl.close()
        self.lsock.close()
        try:
            self.sel.close()
        except Exception:
            pass

    def serve(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if not self.isolated:
            # pid 1 of a pid namespace only receives signals it handles: keep
            # the isolated server deaf to everything but SIGCHLD.
            signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        self.lsock.setblocking(False)
        self.sel.register(self.lsock, selectors.EVENT_READ, ("accept", None))
        self.sel.register(self.wake_r, selectors.EVENT_READ, ("wake", None))
        while not self.stopping:
            timeout = None
            if self.execs:
                now = time.monotonic()
                pending = [e.deadline for e in self.execs.values() if not e.timed_out]
                if pending:
                    timeout = max(0.0, min(pending) - now)
            try:
                events = self.sel.select(timeout)
            except InterruptedError:
                events = []
            for key, _ in events:
                kind, obj = key.data
                # an earlier event of this batch may have finished an exec or
                # dropped a connection (and closed its fd): skip stale events
                try:
                    if kind == "accept":
                        self._accept()
                    elif kind == "wake":
                        try:
                            while os.read(self.wake_r, 512):
                                pass
                        except BlockingIOError:
                            pass
                        self._reap()
                    elif kind == "conn":
                        conn = self.conns.get(obj.sock.fileno())
                        if conn is not None and conn is obj:
                            self._on_conn(conn)
                    else:  # "out" / "peer": only while the exec is live
                        ex = self.execs.get(obj.pid)
                        if ex is not None and ex is obj:
                            if kind == "out" and ex.out_open:
                                self._on_output(ex)
                            elif kind == "peer":
                                self._on_peer(ex)
                except Exception:
                    _log_exception("session server event")
            self._check_deadlines()
            self._reap()
        self._shutdown()

    def _on_term(self, *_: Any) -> None:
        self.stopping = True

    def _shutdown(self) -> None:
        for ex in list(self.execs.values()):
            self._kill_exec(ex)
        os._exit(0)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # EMFILE and friends: retry on the next wake-up
                _log_exception("accept")
                return
            sock.setblocking(False)
            conn = _Conn(sock)
            self.conns[sock.fileno()] = conn
            self.sel.register(sock, selectors.EVENT_READ, ("conn", conn))

    def _drop_conn(self, conn: _Conn, close: bool = True) -> None:
        fd = conn.sock.fileno()
        if fd >= 0:
            try:
                self.sel.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
            self.conns.pop(fd, None)
        if close:
            conn.sock.close()

    def _on_conn(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop_conn(conn)
            return
        conn.buf += data
        del data
        while True:
            if conn.header is None:
                if len(conn.buf) < 4:
                    return
                (n,) = struct.unpack(">I", conn.buf[:4])
                if len(conn.buf) < 4 + n:
                    return
                conn.header = json.loads(bytes(conn.buf[4 : 4 + n]))
                del conn.buf[: 4 + n]
            plen = int(conn.header.get("payload_len", 0))
            if len(conn.buf) < plen:
                return
            payload = conn.buf[:plen]
            conn.buf[:plen] = bytes(plen)  # zero our copy of the request's files
            header = conn.header
            self._drop_conn(conn, close=False)
            conn.sock.setblocking(True)
            self._handle(conn.sock, header, payload)
            return

    def _reply(self, sock: socket.socket, header: dict[str, Any], payload: bytes = b"") -> None:
        try:
            send_msg(sock, header, payload)
        except OSError:
            pass
        finally:
            sock.close()

    def _handle(
        self, sock: socket.socket, header: dict[str, Any], payload: bytes | bytearray
    ) -> None:
        op = header.get("op")
        try:
            if op == "exec":
                self._start_exec(sock, ExecJob(header, payload))
            elif op == "ping":
                self._reply(sock, {"ok": True, "busy": len(self.execs), "pid": os.getpid()})
            elif op == "freeze":
                self._freeze(sock)
            elif op == "exit":
                self._reply(sock, {"ok": True})
                self.stopping = True
            else:
                self._reply(sock, {"ok": False, "error": f"unknown op {op!r}"})
        except Exception as exc:
            self._reply(sock, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})

    def _freeze(self, sock: socket.socket) -> None:
        if self.execs:
            self._reply(sock, {"ok": False, "busy": True, "error": "an exec is running"})
            return
        if not self.isolated or self.layer_dir is None:
            self._reply(sock, {"ok": True, "lowers": [], "gen": self.gen})
            return
        upper = os.path.join(self.layer_dir, f"u{self.gen}")
        if os.listdir(upper):  # something changed since the last freeze
            new_gen = self.gen + 1
            lowers = [upper, *self.lowers]
            opts = overlay_options(lowers, self.layer_dir, new_gen)
            os.mkdir(os.path.join(self.layer_dir, f"u{new_gen}"), 0o755)
            os.mkdir(os.path.join(self.layer_dir, f"w{new_gen}"), 0o700)
            umount2(SANDBOX_DIR, MNT_DETACH)
            mount("overlay", SANDBOX_DIR, "overlay", MS_NOSUID | MS_NODEV, opts)
            self.lowers = lowers
            self.gen = new_gen
            # F's mount namespace is a copy made at its start: it still has the
            # old overlay, whose upper layer is now frozen and shared with the
            # forks. Processes F spawned would write into it, so F goes (later
            # execs fall back to a fresh interpreter).
            if self.factory_pid:
                try:
                    os.kill(self.factory_pid, signal.SIGKILL)
                except OSError:
                    pass
                self._factory_died()
        self._reply(sock, {"ok": True, "lowers": self.lowers, "gen": self.gen})

    def _start_exec(self, sock: socket.socket, job: ExecJob) -> None:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        ack_r, ack_w = os.pipe2(os.O_CLOEXEC)
        zconn = self._factory_conn()
        zfd = zconn.fileno() if zconn is not None else -1
        if 0 <= zfd <= ZYGOTE_FD:  # the child dup2s onto 0..4 first (never the case)
            zfd = -1
        try:
            pid = os.fork()
        except BaseException:
            if zconn is not None:
                zconn.close()
            raise
        if pid == 0:  # pragma: no cover
            exec_child(self, sock, job, out_w, ack_w, self.devnull, zfd)
        if zconn is not None:
            zconn.close()
        job.drop_payload()
        os.close(out_w)
        os.close(ack_w)
        os.set_blocking(out_r, False)
        os.set_blocking(ack_r, False)
        ex = _Exec(pid, sock, out_r, ack_r, job, int(self.cfg["limits"]["output_cap_bytes"]))
        self.execs[pid] = ex
        self.sel.register(out_r, selectors.EVENT_READ, ("out", ex))
        # the host hanging up (a cancelled request) kills the exec
        self.sel.register(sock, selectors.EVENT_READ, ("peer", ex))

    def _on_peer(self, ex: _Exec) -> None:
        try:
            self.sel.unregister(ex.conn)
        except (KeyError, ValueError):
            pass
        try:
            ex.conn.setblocking(False)
            data = ex.conn.recv(1)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        finally:
            ex.conn.setblocking(True)
        if not data and ex.status is None:
            ex.cancelled = True
            self._kill_exec(ex)

    def _read_output(self, ex: _Exec) -> bool:
        """Read what is available; False on EOF or cap."""
        while True:
            try:
                chunk = os.read(ex.out_r, 1 << 16)
            except (BlockingIOError, InterruptedError):
                return True
            if not chunk:
                return False
            room = ex.cap - len(ex.output)
            if len(chunk) > room:
                ex.output += chunk[:room]
                if not ex.truncated:
                    ex.truncated = True
                    self._kill_exec(ex)
                return False
            ex.output += chunk

    def _close_out(self, ex: _Exec) -> None:
        if ex.out_open:
            ex.out_open = False
            try:
                self.sel.unregister(ex.out_r)
            except (KeyError, ValueError):
                pass

    def _on_output(self, ex: _Exec) -> None:
        if not self._read_output(ex):
            self._close_out(ex)

    def _kill_exec(self, ex: _Exec) -> None:
        for fn, target in ((os.killpg, ex.pid), (os.kill, ex.pid)):
            try:
                fn(target, signal.SIGKILL)
            except OSError:
                pass

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for ex in list(self.execs.values()):
            if ex.status is None and not ex.timed_out and now >= ex.deadline:
                ex.timed_out = True
                self._kill_exec(ex)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            if pid == self.factory_pid:
                self._factory_died()
            if pid == self.service_pid:
                self.service_pid = 0  # its leftovers die at the next sweep
            ex = self.execs.get(pid)
            if ex is not None:
                ex.status = status
                ex.t_end = time.monotonic()
                self._finish(ex)

    def _sweep(self) -> None:
        """Kill every other process of the session (we are pid 1) and reap them.

        Waits (bounded) until they are gone, so the next exec sees a clean
        session and the per-session RLIMIT_NPROC count is back to zero. The
        factory F is spared (and continued, should an exec have stopped it).
        """
        if not self.factory_pid and not self.service_pid:
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                return  # ESRCH: nothing else alive
        else:
            try:
                os.kill(self.factory_pid, signal.SIGCONT)
            except OSError:
                pass
        deadline = time.monotonic() + 2.0
        while True:
            if (self.factory_pid or self.service_pid) and not self._kill_all_but_factory():
                return
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == self.factory_pid:  # (a zombie holds its pid until reaped here)
                self._factory_died()
                if not self.service_pid:
                    try:
                        os.kill(-1, signal.SIGKILL)
                    except OSError:
                        pass
            if pid and pid == self.service_pid:
                self.service_pid = 0
            if pid == 0:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.0005)

    def _kill_all_but_factory(self) -> bool:
        """SIGKILL every process but us, F and the service (``kill(-1)`` would hit them); any left?

        The service is every process of K's process session: an exec cannot
        join it (setsid only creates sessions), a service child that calls
        setsid leaves it and dies here.
        """
        keep = (os.getpid(), self.factory_pid)
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in keep:
                continue
            if self.service_pid and _session_of(int(name)) == self.service_pid:
                continue
            found = True
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
        return found

    def _finish(self, ex: _Exec) -> None:
        del self.execs[ex.pid]
        try:
            self.sel.unregister(ex.conn)
        except (KeyError, ValueError):
            pass
        try:
            os.killpg(ex.pid, signal.SIGKILL)  # background jobs of the exec
        except OSError:
            pass
        if self.isolated and not self.execs:
            self._sweep()
        if ex.out_open:
            if not ex.truncated:
                self._read_output(ex)
            self._close_out(ex)
        os.close(ex.out_r)
        try:
            ack = os.read(ex.ack_r, 256).decode(errors="replace")
        except OSError:
            ack = ""
        os.close(ex.ack_r)
        assert ex.status is not None
        if ex.timed_out:
            code = -1
            if ex.output and not ex.output.endswith(b"\n"):
                ex.output += b"\n"
            ex.output += _format_timeout(ex.job.timeout)
        else:
            code = os.waitstatus_to_exitcode(ex.status)
        header = {
            "ok": True,
            "exit_code": code,
            "exec_time_ms": round((ex.t_end - ex.t0) * 1000.0, 3),
            "timed_out": ex.timed_out,
            "truncated": ex.truncated,
            "seed_ack": "verified" if ack == ex.job.seed else "no-ack",
        }
        self._reply(ex.conn, header, bytes(ex.output))


def _die_with_parent() -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _session_of(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return -1


def _unlink_service_files(sock_dir: str, key: str) -> None:
    """Remove session ``key``'s relay sockets and service status files."""
    try:
        names = os.listdir(sock_dir)
    except OSError:
        return
    for name in names:
        if name.startswith(f"{key}.") and name != f"{key}.sock":
            try:
                os.unlink(os.path.join(sock_dir, name))
            except OSError:
                pass


def overlay_options(lowers: list[str], layer_dir: str, gen: int) -> str:
    opts = (
        f"lowerdir={':'.join(lowers)},upperdir={layer_dir}/u{gen},"
        f"workdir={layer_dir}/w{gen},userxattr"
    )
    if len(opts) >= 4000:
        raise OSError(errno.E2BIG, "too many overlay layers (fork chain too long)")
    return opts


# --------------------------------------------------------------------------
# master (fork-server)
# --------------------------------------------------------------------------


def _write_id_maps(proc_dir: int, inner: int, outer_uid: int, outer_gid: int) -> None:
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{inner} {outer_uid} 1"),
        ("gid_map", f"{inner} {outer_gid} 1"),
    ):
        fd = os.open(name, os.O_WRONLY, dir_fd=proc_dir)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


class Master:
    """The template's fork-server: creates, forks and kills sessions."""

    def __init__(self, cfg: dict[str, Any], sock_dir: str) -> None:
        self.cfg = cfg
        self.isolated: bool = bool(cfg["isolated"])
        self.sock_dir = sock_dir
        self.sessions: dict[str, int] = {}  # key -> pid (master's pid ns)
        self.dead: set[int] = set()  # session servers that died, until killed/forgotten
        self.live: set[int] = set()
        self.key_of: dict[int, str] = {}
        self.counter = 0
        self.lsock: socket.socket | None = None
        self.conn: socket.socket | None = None

    def preload(self) -> None:
        import importlib

        if self.isolated:
            self.cfg["_seccomp"] = build_seccomp_filter()
            if self.cfg.get("service"):
                self.cfg["_seccomp_inet"] = build_seccomp_filter(allow_inet=True, ip_only=True)
        try:  # trusted modules, e.g. the grading harness (see factory.load_warm_modules)
            zygote.load_warm_modules(self.cfg.get("warm_modules"))
        except Exception as exc:
            print(f"collimate master: warm modules failed: {exc!r}", file=sys.stderr)

        for name in self.cfg.get("preload") or []:
            try:
                importlib.import_module(name)
            except Exception as exc:
                print(f"collimate master: preload {name!r} failed: {exc!r}", file=sys.stderr)

    def run(self) -> None:
        if self.isolated:
            prctl(PR_SET_CHILD_SUBREAPER, 1)
        signal.signal(signal.SIGCHLD, self._on_chld)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        self.preload()
        _freeze_heap()
        path = os.path.join(self.sock_dir, "master.sock")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(path + ".tmp")
        os.rename(path + ".tmp", path)
        lsock.listen(128)
        self.lsock = lsock
        while True:
            conn, _ = lsock.accept()
            self.conn = conn
            try:
                header, _payload = recv_msg(conn)
                reply = self._handle(header)
            except EOFError:
                reply = None
            except Exception as exc:
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            if reply is not None:
                try:
                    send_msg(conn, reply)
                except OSError:
                    pass
            conn.close()
            self.conn = None

    def _on_chld(self, *_: Any) -> None:
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.live:
                self.live.discard(pid)
                if pid in self.key_of:  # still registered: remember it died
                    self.dead.add(pid)

    def _handle(self, header: dict[str, Any]) -> dict[str, Any]:
        op = header.get("op")
        if op == "ping":
            return {"ok": True, "sessions": len(self.sessions), "pid": os.getpid()}
        if op == "create":
            keys = self._spawn(None, [list(self.cfg["layers"])])
            return {"ok": True, "keys": keys}
        if op == "fork":
            parent = str(header["parent"])
            if parent not in self.sessions:
                return {"ok": False, "error": "parent session is gone", "lost": True}
            lowers = [str(x) for x in header["lowers"]]
            keys = self._spawn(parent, [lowers] * int(header["n"]))
            return {"ok": True, "keys": keys}
        if op == "kill":
            for key in header["keys"]:
                self._kill(str(key))
            return {"ok": True}
        if op == "killall":
            for key in list(self.sessions):
                self._kill(key)
            return {"ok": True}
        if op == "alive":
            return {"ok": True, "alive": [k for k in header["keys"] if k in self.sessions]}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def _kill(self, key: str) -> None:
        pid = self.sessions.pop(key, None)
        if pid is not None and pid not in self.dead:
            if self.isolated:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            else:
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
                deadline = time.monotonic() + 2.0
                while pid not in self.dead and time.monotonic() < deadline:
                    time.sleep(0.002)
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        if pid is not None:
            self.key_of.pop(pid, None)
            self.dead.discard(pid)
        try:
            os.unlink(os.path.join(self.sock_dir, f"{key}.sock"))
        except OSError:
            pass
        _unlink_service_files(self.sock_dir, key)
        if self.isolated:
            try:
                os.rmdir(os.path.join(INTERNAL_DIR, "s", key))
            except OSError:
                pass
        else:
            import shutil

            shutil.rmtree(os.path.join(self.cfg["none_root"], key), ignore_errors=True)

    def _spawn(self, parent: str | None, lowers_list: list[list[str]]) -> list[str]:
        """Fork len(lowers_list) sessions; all or nothing. Returns their keys."""
        ns_fds: list[int] = []
        if parent is not None and self.isolated:
            ppid = self.sessions[parent]
            ns_fds = [
                os.open(f"/proc/{ppid}/ns/user", os.O_RDONLY | os.O_CLOEXEC),
                os.open(f"/proc/{ppid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC),
            ]
        started: list[tuple[str, int, int]] = []  # key, read fd, C pid
        try:
            if self.isolated:
                jobs: list[tuple[str, list[str], int]] = []
                for lowers in lowers_list:
                    self.counter += 1
                    key = _b36(self.counter)
                    r, w = os.pipe2(os.O_CLOEXEC)
                    jobs.append((key, lowers, w))
                    started.append((key, r, 0))
                try:
                    if ns_fds:
                        # helpers (one per CPU) join the parent's namespaces and clone
                        n_help = max(1, min(len(jobs), os.cpu_count() or 1))
                        for h in range(n_help):
                            chunk = jobs[h::n_help]
                            if os.fork() == 0:  # pragma: no cover - child
                                mine = {w for _, _, w in chunk}
                                for _, _, w in jobs:
                                    if w not in mine:
                                        os.close(w)
                                for _, r, _ in started:
                                    os.close(r)
                                self._clone_sessions(chunk, ns_fds)
                    else:
                        self._clone_sessions(jobs, [])
                finally:
                    for _, _, w in jobs:
                        os.close(w)
            else:
                for lowers in lowers_list:
                    self.counter += 1
                    key = _b36(self.counter)
                    r, w = os.pipe2(os.O_CLOEXEC)
                    pid = os.fork()
                    if pid == 0:  # pragma: no cover - child
                        os.close(r)
                        self._session_child(key, lowers, ns_fds, parent, w)
                    os.close(w)
                    started.append((key, r, pid))
            results = self._collect(started)
        finally:
            for fd in ns_fds:
                os.close(fd)
        for key, (pid, _) in results.items():
            if pid:
                self.live.add(pid)
                self.key_of[pid] = key
        errors = [err for _, (_, err) in results.items() if err]
        if errors:
            for key, (pid, _) in results.items():
                if pid:
                    self.sessions[key] = pid
                    self._kill(key)
            raise OSError(errors[0])
        for key, (pid, _) in results.items():
            self.sessions[key] = pid
        return [key for key, _, _ in started]

    def _collect(self, started: list[tuple[str, int, int]]) -> dict[str, tuple[int, str]]:
        """Read each child's report: 'pid N' then 'ready' (or 'error ...')."""
        sel = selectors.DefaultSelector()
        bufs: dict[int, bytearray] = {}
        for key, r, _ in started:
            sel.register(r, selectors.EVENT_READ, key)
            bufs[r] = bytearray()
        deadline = time.monotonic() + 30.0
        open_fds = {r for _, r, _ in started}
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for skey, _ in sel.select(remaining):
                fd = int(skey.fd)
                try:
                    chunk = os.read(fd, 4096)
                except InterruptedError:
                    continue
                if chunk:
                    bufs[fd] += chunk
                else:
                    sel.unregister(fd)
                    open_fds.discard(fd)
        sel.close()
        out: dict[str, tuple[int, str]] = {}
        for key, r, _ in started:
            os.close(r)
            pid = 0
            err = ""
            ready = False
            for line in bufs[r].decode(errors="replace").splitlines():
                if line.startswith("pid "):
                    pid = int(line[4:])
                elif line == "ready":
                    ready = True
                elif line.startswith("error "):
                    err = line[6:]
            if not ready and not err:
                err = "session server did not come up"
            out[key] = (pid, err)
        return out

    def _session_child(
        self, key: str, lowers: list[str], ns_fds: list[int], parent: str | None, w: int
    ) -> None:  # pragma: no cover - runs in a forked child
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if self.conn is not None:
                self.conn.close()
            if self.lsock is not None:
                self.lsock.close()
            self._plain_session(key, parent, w)
        except BaseException as exc:
            try:
                os.write(w, f"error {type(exc).__name__}: {exc}\n".encode())
            except BaseException:
                pass
            try:
                import traceback

                sys.stderr.write(f"collimate session {key}: server failed:\n")
                traceback.print_exc()
                sys.stderr.flush()
            except BaseException:
                pass
            os._exit(1)
        os._exit(0)

    def _clone_sessions(self, jobs: list[tuple[str, list[str], int]], ns_fds: list[int]) -> None:
        """Clone one session server per job, each pid 1 of fresh namespaces.

        Runs in the master (fresh sessions) or in a forked helper that first
        joins the parent session's user and mount namespaces (forks: the
        parent's frozen layers are mounted there; its /sandbox, /tmp, /dev/shm
        and /proc get mounted over, not unmounted: an umount costs an RCU
        grace period). The helper reports and exits; the master, a
        subreaper, inherits the servers.
        """
        helper = bool(ns_fds)
        try:
            proc = os.open("/proc", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            if helper:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                if self.conn is not None:
                    self.conn.close()
                if self.lsock is not None:
                    self.lsock.close()
                setns(ns_fds[0], CLONE_NEWUSER)
                setns(ns_fds[1], CLONE_NEWNS)
            uid, gid = os.getuid(), os.getgid()
            flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
            for key, lowers, w in jobs:
                go_r, go_w = os.pipe2(os.O_CLOEXEC)
                try:
                    pid = clone_process(flags)
                except OSError as exc:
                    os.write(w, f"error clone: {exc}\n".encode())
                    os.close(go_r)
                    os.close(go_w)
                    continue
                if pid == 0:  # pragma: no cover - the new session server
                    os.close(go_w)
                    for _, _, other in jobs:
                        if other != w:
                            os.close(other)
                    os.close(proc)
                    self._session_pid1(key, lowers, bool(ns_fds), w, go_r)
                os.close(go_r)
                try:
                    pdir = os.open(str(pid), os.O_PATH | os.O_DIRECTORY, dir_fd=proc)
                    try:
                        _write_id_maps(pdir, 1000, uid, gid)
                    finally:
                        os.close(pdir)
                    os.write(go_w, b"g")
                    os.write(w, f"pid {pid}\n".encode())
                except OSError as exc:
                    os.write(w, f"pid {pid}\nerror id maps: {exc}\n".encode())
                finally:
                    os.close(go_w)
            os.close(proc)
        except BaseException as exc:
            if not helper:
                raise
            for _, _, w in jobs:
                try:
                    os.write(w, f"error {type(exc).__name__}: {exc}\n".encode())
                except OSError:
                    pass
            os._exit(1)
        if helper:
            os._exit(0)

    def _session_pid1(
        self, key: str, lowers: list[str], forked: bool, w: int, go_r: int
    ) -> None:  # pragma: no cover - runs in the cloned session server
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if self.conn is not None:
                self.conn.close()
            if self.lsock is not None:
                self.lsock.close()
            if os.read(go_r, 1) != b"g":  # the creator failed to write our id maps
                os._exit(1)
            os.close(go_r)
            self._isolated_session(key, lowers, forked, w)
        except BaseException as exc:
            try:
                os.write(w, f"error {type(exc).__name__}: {exc}\n".encode())
            except BaseException:
                pass
            _log_exception(f"session {key}")
            os._exit(1)
        os._exit(0)

    def _isolated_session(self, key: str, lowers: list[str], forked: bool, w: int) -> None:
        # pid 1 of the session's pid namespace
        if not forked:  # forks inherit the parent's private propagation
            mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        layer_dir = os.path.join(INTERNAL_DIR, "s", key)
        os.mkdir(layer_dir, 0o700)
        disk = int(self.cfg["limits"]["session_disk_bytes"])
        mount("tmpfs", layer_dir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={disk},mode=0700")
        os.mkdir(os.path.join(layer_dir, "u0"), 0o755)
        os.mkdir(os.path.join(layer_dir, "w0"), 0o700)
        tmp = os.path.join(layer_dir, "tmp")
        os.mkdir(tmp)
        os.chmod(tmp, 0o1777)
        mount(
            "overlay",
            SANDBOX_DIR,
            "overlay",
            MS_NOSUID | MS_NODEV,
            overlay_options(lowers, layer_dir, 0),
        )
        mount(tmp, "/tmp", None, MS_BIND, None)
        shm = os.path.join(layer_dir, "shm")
        os.mkdir(shm)
        os.chmod(shm, 0o1777)
        mount(shm, "/dev/shm", None, MS_BIND, None)
        try:  # a private pty namespace (bwrap's devpts is shared by the container)
            mount(
                "devpts",
                "/dev/pts",
                "devpts",
                MS_NOSUID | MS_NOEXEC,
                "newinstance,ptmxmode=0666,mode=0620",
            )
        except OSError:
            pass
        os.chdir("/")
        lsock = self._listen(key)
        server = SessionServer(
            self.cfg,
            lsock,
            isolated=True,
            sandbox_dir=SANDBOX_DIR,
            tmp_dir="/tmp",
            layer_dir=layer_dir,
            lowers=lowers,
            gen=0,
        )
        _freeze_heap(collect=False)
        server.start_factory()  # before this server reads any request
        server.start_service(key, self.sock_dir)
        os.write(w, b"ready\n")
        os.close(w)
        server.serve()

    def _plain_session(self, key: str, parent: str | None, w: int) -> None:
        master = os.getppid()
        os.setsid()
        # No pid namespace takes this server down with the master: die with it
        # (the master dies with the node), so a crashed node leaves no sessions.
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != master:
            os._exit(1)
        root = os.path.join(self.cfg["none_root"], key)
        sandbox = os.path.join(root, "sandbox")
        tmp = os.path.join(root, "tmp")
        os.makedirs(tmp, 0o700)
        if parent is not None:
            import shutil

            shutil.copytree(
                os.path.join(self.cfg["none_root"], parent, "sandbox"), sandbox, symlinks=True
            )
        else:
            os.makedirs(sandbox, 0o755)
            import shutil

            for layer in reversed(self.cfg["layers"]):
                shutil.copytree(layer, sandbox, symlinks=True, dirs_exist_ok=True)
        os.chdir(root)
        lsock = self._listen(key)
        cfg = dict(self.cfg)
        env = dict(cfg.get("base_env") or {})
        env.update(HOME=sandbox, TMPDIR=tmp, PYTHONUSERBASE=os.path.join(sandbox, ".local"))
        cfg["base_env"] = env
        server = SessionServer(
            cfg,
            lsock,
            isolated=False,
            sandbox_dir=sandbox,
            tmp_dir=tmp,
            layer_dir=None,
            lowers=[],
            gen=0,
        )
        _freeze_heap()
        os.write(w, f"pid {os.getpid()}\nready\n".encode())
        os.close(w)
        server.serve()

    def _listen(self, key: str) -> socket.socket:
        path = os.path.join(self.sock_dir, f"{key}.sock")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(path)
        lsock.listen(64)
        return lsock


def _log_exception(what: str) -> None:
    try:
        import traceback

        sys.stderr.write(f"collimate supervisor: {what} failed:\n")
        traceback.print_exc()
        sys.stderr.flush()
    except BaseException:
        pass


def _freeze_heap(collect: bool = True) -> None:
    """Move every live object out of the GC's reach before serving forks.

    A collection in a forked child would touch every object header and
    copy-on-write most of the parent's heap (slow under virtualization).
    """
    import gc

    if collect:
        gc.collect()
    gc.freeze()


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "master":
        print("usage: supervisor.py master SOCK_DIR CONFIG_JSON", file=sys.stderr)
        return 2
    cfg = json.loads(argv[2])
    for path in reversed(cfg.get("sys_path") or []):
        if path not in sys.path:
            sys.path.insert(0, path)
    Master(cfg, argv[1]).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
