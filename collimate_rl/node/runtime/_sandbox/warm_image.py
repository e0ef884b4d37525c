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
W, an image worker (``image_worker.py``)
    a fork of IZ that grades in-process, as the node's worker does; the master hands a W
    to one grade at a time. W asks IZ for each candidate over a link of its own.
C, a candidate (``image_candidate.py``)
    a clone of IZ into namespaces of its own (user, mount, pid, IPC, and a network namespace
    from IZ's pool), pid 1 there, over a fresh copy-on-write layer of the pristine root,
    hardened as a box is before anything of the grade reaches it.

IZ runs in a user namespace of its own (:func:`_own_user_namespace`), which owns the network
namespaces of its pool and nothing else: its mounts stay its box's.

Requests, one datagram each: on IZ's control socket (fd 3, from the master) ``w`` with
the socket a node worker will talk to W on, answered ``ok`` with a pidfd of W; on a W's
link ``c`` with the candidate's socket, stdout, stderr, stdin, its setup pipe and its
ready pipe, answered with C's pid (as IZ and W see it) or ``error ...``.

Stdlib only, Python 3.10+ (the image's): shipped as source with the modules in
:data:`SHIPPED` (:func:`program`).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
from typing import Any

from .common import freeze_heap, take_low_fds
from .home import Home
from .image_candidate import candidate_job
from .image_worker import worker_main
from .landlock import Fence
from .netpool import NetPool
from .seccomp import PreparedFilter
from .syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    PR_SET_DUMPABLE,
    clone_process,
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
    "image_candidate",
    "image_worker",
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
    os.close(READY_FD)  # (it said its word)
    take_low_fds()  # every descriptor IZ receives above 4: a candidate moves its own onto 0..3
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
            worker_main(fds[0], its_link, settings)
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
            candidate_job(fds, ids, settings)  # (never returns: C exits, never steps home)
    except OSError as exc:
        pool.release(slot)
        return f"error clone: {exc}".encode()
    finally:
        if slot >= 0:
            setns(pool.home.fds["net"], CLONE_NEWNET)
    sel.register(os.pidfd_open(pid), selectors.EVENT_READ, slot)  # freed when C ends
    return str(pid).encode()
