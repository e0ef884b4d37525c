"""The warm fork-server of an image's own Python, its grading workers and its candidates.

A grade on a ``python3`` template runs the node's warm harness in a worker and forks the
node's warm interpreter for each candidate. An image's grades must run the image's
``python3`` (its version, its packages), and starting one per grade costs more than the
grade (issue 42). So an image template gets the same split in its own Python:

IZ, the image zygote (:func:`serve`)
    the image's ``python3 -I -S``, run in a box of its own (``image_zygote.py``): that box
    pivoted into the image's pristine root and detached the container's tree, so IZ's
    mount namespace holds the image and nothing of the node's; it dropped every capability
    and loaded a seccomp filter that still lets a candidate build its own namespaces
    (``build_seccomp_filter(nest=True)``). Its ``/tmp`` is a read-only bind of that root
    without the mounts on it: the lower layer of every candidate's root. IZ compiles the
    grading harness once, then only forks: it reads one-byte requests and descriptors,
    never a request's data, so every process it forks is pristine.
W, an image worker (:func:`_worker_main`)
    a fork of IZ that grades in-process, as the node's worker does (``worker_grade.py``,
    ``grade_state.py``): the payload, environment and seed arrive on its connection from a
    node worker; trusted test code runs in the image's Python. W asks IZ for each
    candidate over a link of its own. The master hands a W to one grade at a time.
C, a candidate (:func:`_candidate_job`)
    a clone of IZ into new user, mount, pid, network and IPC namespaces, pid 1 of its own:
    it maps the image's user onto IZ's ids, makes a size-limited tmpfs with an overlay's
    upper and work dirs, mounts the overlay (lower: IZ's ``/tmp``), the container's
    ``/dev`` with a private ``/dev/shm`` and its own ``/proc``, pivots into it and
    detaches the rest, drops every capability, fences itself with Landlock (as a box does,
    its root writable) and loads the candidates' seccomp filter
    (which denies mounts and namespaces again: filters stack, the strictest wins). Then
    it reads its environment and seed from W, says it is ready and serves the harness's
    requests (``_child._candidate_main``). When it exits, its namespaces go with it.

Requests, one datagram each: on IZ's control socket (fd 3, from the master) ``w`` with
the socket a node worker will talk to W on, answered ``ok`` with a pidfd of W; on a W's
link ``c`` with the candidate's socket, stdout, stderr, stdin, its setup pipe and its
ready pipe, answered with C's pid (as IZ and W see it) or ``error ...``.

Stdlib only, Python 3.10+ (the image's): shipped as source with the modules in
:data:`SHIPPED` (:func:`program`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import selectors
import signal
import socket
import sys
import time
from typing import Any

from .common import freeze_heap
from .framing import recv_msg, send_msg, write_all
from .grade_state import grade_reply, grade_state, run_harness
from .hardening import apply_limits, drop_all_capabilities
from .home import Home
from .landlock import Fence
from .netpool import NetPool
from .seccomp import PreparedFilter, load_seccomp
from .seeding import apply_python_seed
from .syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_DUMPABLE,
    PR_SET_PDEATHSIG,
    clone_process,
    mount,
    pivot_into_cwd,
    prctl,
    setns,
    unshare,
    write_id_maps,
)

#: The modules that travel with this one, in the order they are defined.
SHIPPED = (
    "layout",
    "syscalls",
    "syscall_table",
    "syscall_allowlist",
    "seccomp",
    "framing",
    "hardening",
    "landlock",
    "seeding",
    "common",
    "home",
    "netpool",
    "running_exec",
    "grade_state",
    "warm_image",
)
#: The package they form in the image's interpreter.
PACKAGE = "collimate_sandbox"
#: What ``python3 -I -S -c`` runs: read the program (JSON) from stdin, define the package,
#: serve. Nothing of the image's site is imported (``-I -S``): only its standard library.
BOOT = (
    "import json, sys, types\n"
    "d = json.loads(sys.stdin.buffer.read())\n"
    "sys.stdin.close()\n"
    f"p = types.ModuleType({PACKAGE!r}); p.__path__ = []; sys.modules[{PACKAGE!r}] = p\n"
    "for name, source in d['modules']:\n"
    f"    m = types.ModuleType({PACKAGE!r} + '.' + name); m.__package__ = {PACKAGE!r}\n"
    "    sys.modules[m.__name__] = m\n"
    "    exec(compile(source, '<collimate ' + name + '>', 'exec'), m.__dict__)\n"
    f"sys.modules[{PACKAGE!r} + '.warm_image'].serve(d['settings'])\n"
)
#: A candidate's namespaces: all but the cgroup and UTS ones (nothing reads them), and its
#: network namespace, which comes from IZ's pool (``netpool.py``) when one is clean.
JOB_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC
#: Network namespaces IZ keeps for its candidates at most (one per live candidate).
NETNS_CAP = 64
#: IZ's control socket, its ready pipe.
CTL_FD, READY_FD = 3, 4
#: The harness's module name (``collimate_rl.grading._shipping.WARM_MODULE``).
HARNESS = "collimate_harness"


def program(settings: dict[str, Any]) -> bytes:
    """What IZ reads on stdin: the shipped modules' sources and its settings (JSON).

    >>> import json
    >>> sorted(json.loads(program({"x": 1})))
    ['modules', 'settings']
    """
    import json

    here = os.path.dirname(os.path.abspath(__file__))
    modules = []
    for name in SHIPPED:
        with open(os.path.join(here, f"{name}.py"), encoding="utf-8") as handle:
            modules.append((name, handle.read()))
    return json.dumps({"modules": modules, "settings": settings}).encode()


def serve(settings: dict[str, Any]) -> None:  # pragma: no cover - IZ, in the image
    """IZ's life: load the harness, say ready, fork workers and clone candidates; never
    returns (it exits when the master hangs up)."""
    import random  # noqa: F401  (what every candidate imports, imported once here)

    _load_harness(settings.pop("harness"))
    settings["_filter"] = PreparedFilter(bytes.fromhex(settings.pop("seccomp")))
    settings["_fence"] = Fence(networked=False, writable=("/",))  # (the copy-on-write root)
    ids = _own_user_namespace()
    pool = NetPool(Home(), cap=NETNS_CAP)
    prctl(PR_SET_DUMPABLE, 0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps workers and candidates
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, CTL_FD)
    sel = selectors.DefaultSelector()
    sel.register(ctl, selectors.EVENT_READ)
    freeze_heap()  # a fork's GC would otherwise touch (copy) every page it shares with IZ
    os.write(READY_FD, b"ok")
    _hold_low_fds()
    while True:
        for key, _ in sel.select():
            if key.data is not None:  # a candidate ended: its network namespace is free
                sel.unregister(key.fileobj)
                os.close(key.fd)
                pool.release(key.data)
                continue
            sock: socket.socket = key.fileobj  # type: ignore[assignment]
            try:
                msg, fds, _flags, _addr = socket.recv_fds(sock, 16, 8)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                msg, fds = b"", []
            if not msg:  # the master hung up (IZ ends), or a worker is gone
                if sock is ctl:
                    os._exit(0)
                sel.unregister(sock)
                sock.close()
                continue
            if sock is ctl and msg == b"w":
                answer, passed = _fork_worker(fds, sel, settings)
            elif sock is not ctl and msg == b"c":
                answer, passed = _clone_candidate(fds, ids, settings, pool, sel), []
            else:
                answer, passed = b"error unknown request", []
            try:
                socket.send_fds(sock, [answer], passed)
            except OSError:
                pass
            finally:
                for fd in [*fds, *passed]:
                    os.close(fd)


def _hold_low_fds() -> None:  # pragma: no cover - IZ
    """Keep fds 0..4 taken (``/dev/null``; 3 is the control socket), so every descriptor
    IZ receives is above them: a candidate moves its own onto 0..3 in order."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, READY_FD)  # (the ready pipe said its word: closed by this)
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:  # (stdin, read at the start, is closed)
            os.dup2(null, fd)
    if null > READY_FD:
        os.close(null)


def _load_harness(source: str) -> None:  # pragma: no cover - IZ
    """Compile the grading harness once and define it as ``collimate_harness``."""
    import types

    module = types.ModuleType(HARNESS)
    exec(compile(source, f"<{HARNESS}>", "exec"), module.__dict__)
    sys.modules[HARNESS] = module


def _fork_worker(
    fds: list[int], sel: selectors.BaseSelector, settings: dict[str, Any]
) -> tuple[bytes, list[int]]:  # pragma: no cover - IZ
    """Fork W on the node worker's socket ``fds[0]``; ``(answer, [pidfd of W])``."""
    if len(fds) != 1:
        return b"error a worker takes one socket", []
    ours, its_link = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            _worker_main(fds[0], its_link, settings)
        finally:
            os._exit(1)
    its_link.close()
    sel.register(ours, selectors.EVENT_READ)
    return b"ok", [os.pidfd_open(pid)]


def _own_user_namespace() -> tuple[int, int]:  # pragma: no cover - IZ
    """Enter a user namespace of IZ's own, and a network namespace it owns: IZ may then make
    network namespaces and step into them (the pool), which its box's namespace forbids.

    Its capabilities there reach only what that namespace owns (those network namespaces);
    its mounts stay its box's, which it cannot change. IZ's ids inside (the sandbox uid's);
    a candidate maps the image's user onto them.
    """
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER | CLONE_NEWNET)
    proc = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY)
    try:
        write_id_maps(proc, uid, uid, gid, gid)
    finally:
        os.close(proc)
    return uid, gid


def _clone_candidate(
    fds: list[int],
    ids: tuple[int, int],
    settings: dict[str, Any],
    pool: NetPool,
    sel: selectors.BaseSelector,
) -> bytes:  # pragma: no cover - IZ
    """Clone C on its six descriptors, in a pooled network namespace when one is clean;
    C's pid (as text), or ``error ...``."""
    if len(fds) != 6:
        return b"error a candidate takes six descriptors"
    slot = pool.acquire()
    try:
        if slot >= 0:
            setns(slot, CLONE_NEWNET)
        pid = clone_process(JOB_NAMESPACES | (CLONE_NEWNET if slot < 0 else 0))
        if pid == 0:
            _candidate_job(fds, ids, settings)  # (never returns: C exits, never steps home)
    except OSError as exc:
        pool.release(slot)
        return f"error clone: {exc}".encode()
    finally:
        if slot >= 0:
            setns(pool.home.fds["net"], CLONE_NEWNET)
    sel.register(os.pidfd_open(pid), selectors.EVENT_READ, slot)  # freed when C ends
    return str(pid).encode()


def _candidate_job(
    fds: list[int], ids: tuple[int, int], settings: dict[str, Any]
) -> None:  # pragma: no cover - C
    """C: build its root, harden, take its environment, serve the harness; never returns."""
    sock, out_w, err_w, in_r, setup_r, ready_w = fds
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # IZ gone: its candidates go too
        prctl(PR_SET_DUMPABLE, 1)  # (IZ is not) so that C may write its own id maps
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _build_root(ids, settings)
        drop_all_capabilities(int(settings["cap_last"]), bounding=True)
        settings["_fence"].apply()  # no TCP, no other fence's abstract sockets
        load_seccomp(settings["_filter"])  # the candidates': no mounts, no namespaces
        setup = json.loads(_read_all(setup_r))
        os.environ.clear()
        os.environ.update(setup["env"])
        apply_limits(settings["limits"])
        os.umask(0o022)
        try:
            os.chdir(settings["workdir"])
        except OSError:
            os.chdir("/")
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as a fresh interpreter has them
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        apply_python_seed(str(setup["seed"]))
        os.write(ready_w, b"ok")
    except BaseException as exc:
        try:
            os.write(ready_w, f"error {type(exc).__name__}: {exc}".encode()[:4000])
        finally:
            os._exit(1)
    os.close(ready_w)
    harness: Any = sys.modules[HARNESS]
    try:
        harness._candidate_main([sock, out_w, err_w, in_r])
    finally:
        os._exit(0)


def _read_all(fd: int) -> bytes:  # pragma: no cover - C
    data = bytearray()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            os.close(fd)
            return bytes(data)
        data += chunk


def _build_root(ids: tuple[int, int], settings: dict[str, Any]) -> None:  # pragma: no cover
    """C's root: a fresh copy-on-write layer over the pristine image (see the module)."""
    uid, gid = settings["user"]  # the image's user, as IZ's ids (``ids``)
    proc = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY)
    try:
        write_id_maps(proc, uid, ids[0], ids[1], gid)
    finally:
        os.close(proc)
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    lower = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)  # the image root, without mounts
    try:
        size = int(settings["disk_bytes"])
        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=0755")
        for name in ("u", "w", "r"):
            os.mkdir(f"/tmp/{name}", 0o755)
        options = f"lowerdir=/proc/self/fd/{lower},upperdir=/tmp/u,workdir=/tmp/w,userxattr"
        mount("overlay", "/tmp/r", "overlay", MS_NOSUID | MS_NODEV, options)
    finally:
        os.close(lower)
    mount("/dev", "/tmp/r/dev", None, MS_BIND | MS_REC, None)
    mount("tmpfs", "/tmp/r/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    mount("proc", "/tmp/r/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    os.chdir("/tmp/r")
    pivot_into_cwd()


class CandidateRefused(BaseException):
    """IZ could not start a candidate: an infrastructure failure, never a verdict (a
    ``BaseException``, so no ``except Exception`` in the harness or test code folds it in)."""


class _Candidates:
    """W's source of candidates for the harness's ``Runner``: clones of IZ (``spawn``)."""

    def __init__(self, link: socket.socket) -> None:
        self.link = link

    def spawn(self, fds: list[int], timeout: float) -> int:
        setup_r, setup_w = os.pipe()
        ready_r, ready_w = os.pipe()
        try:
            self.link.settimeout(max(5.0, min(timeout, 30.0)))
            socket.send_fds(self.link, [b"c"], [*fds, setup_r, ready_w])
            answer = self.link.recv(4096)
        except OSError as exc:
            raise CandidateRefused(f"the image zygote did not answer: {exc}") from None
        finally:
            os.close(setup_r)
            os.close(ready_w)
        try:
            if not answer.isdigit():
                raise CandidateRefused(answer.decode(errors="replace") or "no candidate")
            setup = {"env": dict(os.environ), "seed": os.environ.get("COLLIMATE_SEED", "")}
            with contextlib.suppress(OSError):  # (if it died, its ready pipe says so)
                write_all(setup_w, json.dumps(setup).encode())
            os.close(setup_w)
            setup_w = -1
            said = os.read(ready_r, 4096)
            if said != b"ok":
                why = said.decode(errors="replace").removeprefix("error ") or "it died"
                raise CandidateRefused(f"the candidate did not start: {why}")
            return int(answer)
        finally:
            if setup_w >= 0:
                os.close(setup_w)
            os.close(ready_r)

    def close(self) -> None:
        """Nothing to release: each candidate ends with its pid 1 (the harness kills it)."""


def _worker_main(conn_fd: int, link: socket.socket, settings: dict[str, Any]) -> None:
    """W: grade each request on ``conn_fd`` in-process; never returns (exits at EOF)."""
    drop_all_capabilities(int(settings["cap_last"]), bounding=True)  # (IZ's, in its namespace)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    low = 3  # IZ's descriptors (its control socket, the other workers' links) are not W's
    for keep in sorted((conn_fd, link.fileno())):
        os.closerange(low, keep)
        low = keep + 1
    os.closerange(low, 1 << 16)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, conn_fd)
    harness: Any = sys.modules[HARNESS]
    source = _Candidates(link)
    at_rest = dict(os.environ)
    while True:
        try:
            header, payload = recv_msg(conn)
        except (EOFError, OSError):
            os._exit(0)
        started = time.monotonic()
        seed, timeout = str(header["seed"]), float(header["timeout"])
        printed = io.StringIO()
        os.environ.clear()
        os.environ.update(header["env"])
        try:
            grade = json.loads(bytes(payload))
            del payload
            with grade_state(seed, printed):
                with contextlib.suppress(OSError):
                    os.chdir(settings["workdir"])
                frame = run_harness(harness, grade, source, seed, timeout, started)
            reply, output = grade_reply(harness, grade["nonce"], frame, printed, timeout, started)
        except CandidateRefused as exc:
            reply, output = {"ok": False, "error": str(exc)}, b""
        except Exception as exc:  # a payload W cannot read: not the candidate's doing
            reply, output = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, b""
        finally:
            os.environ.clear()
            os.environ.update(at_rest)
        try:
            send_msg(conn, dict(reply, id=header.get("id")), output)
        except OSError:
            os._exit(0)
