"""Inside a box: the process the master cloned to run a light session's code.

The master (``boxes.py``) clones a box with ``CLONE_NEWUSER | CLONE_NEWPID |
CLONE_NEWNS`` while it stands in the session's mount and IPC namespaces and a
pooled network namespace. The box is pid 1 of its pid namespace, in a copy of
the session's mount namespace. Before it tells the master it is ready it maps
its uid, mounts its own ``/proc``, covers ``/.collimate``, keeps only the
descriptors it was given, drops every capability (the bounding set too: it is
full again in a new user namespace), sets ``no_new_privs``, applies the Landlock
fence (``landlock.py``: writes only below the session's writable paths, no TCP) and loads
the seccomp filter. Then, by role:

* ``candidate``: the descriptors become fds 0..4 (program, stdout, stderr,
  socket, stdin, as the factory's spawn protocol has them, see ``factory.py``);
  it applies the exec's rlimits, env and seed, reads its program from fd 0 and
  runs it as ``__main__``. One process: the candidate is pid 1 (when it exits
  the kernel kills whatever it left).
* ``exec``: the descriptors become fds 0..5: the job pipe, the merged output
  (twice: stdout and stderr), the seed acknowledgement, the status pipe and the
  box's line to the master. pid 1 stays a small non-dumpable init (the exec cannot
  read its memory): it runs the job (the same frame a session server gets, after a
  byte that says its kind) in a process of its own, a fork of itself for Python code
  (which reads the job and runs it in this warm interpreter, as an exec child runs
  it: ``exec_child.run_job``), a spawned program for a shell command, argv lists or
  another interpreter (``spawned_job.py``: no copy of the warm image). Then it reaps
  it, kills and reaps every leftover (as a session server's sweep) and writes the
  exec's wait status to the status pipe.
  Nothing of the exec is left but its files, so the init may serve the session's
  next exec: it tells the master it is idle before it closes the status pipe, and
  waits for the next exec's pipes on its line (the master keeps it, or hangs up, and
  the init exits). Python code runs in a fork of the init, and an init that read
  earlier jobs would hold what they carried (their files, code and environment, in
  freed memory): so the init never reads a Python job (the worker writes the job's
  kind first and the fork reads the job itself), and once it has read a job (a
  program's, spawned or forked) it says so, and takes no Python job again.

A candidate box that fails before it is ready writes ``error ...`` to the
ready pipe and exits: the master answers the spawn with an error (an
infrastructure failure, never a candidate's crash). An exec box has no ready
pipe (its worker does not wait for its set-up; the job is already in its
pipe): it writes ``error ...`` to its status pipe instead, which the worker
reports as an infrastructure failure, never as the exec's exit status.
"""

from __future__ import annotations

import _signal
import contextlib
import os
import signal
import socket
from typing import Any

from .common import kill_and_reap_all, log_exception, reap_until
from .environ import amend_environ
from .exec_child import EXEC_DEFAULT_SIGNALS, ExecJob, run_job
from .factory import Stdio, run_main
from .framing import read_frame, write_all
from .hardening import apply_limits, drop_all_capabilities
from .image_root import enter_image_root, image_settings
from .layout import COVER_DIR, INTERNAL_DIR, SANDBOX_DIR, SANDBOX_ID
from .seccomp import load_seccomp
from .seeding import apply_python_seed
from .spawned_job import address_space_used, run_spawned, spawnable
from .syscalls import (
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    PR_SET_DUMPABLE,
    mount,
    prctl,
    set_name,
    write_id_maps,
)

#: An exec box's line to the master: "idle" after an exec, then the next exec's pipes.
CTL_FD = 5
#: Execs one box serves at most before it makes way for a fresh one.
MAX_EXECS_PER_BOX = 1000
#: Address space an init that took an exec's limits keeps free to read the next job
#: (the node takes request bodies up to 64 MiB).
_NEXT_JOB_ROOM = 256 << 20


class BoxSpec:
    """What the master tells a box: its role, its descriptors and its session's settings."""

    def __init__(
        self,
        role: str,
        fds: list[int],
        ready_w: int,
        cfg: dict[str, Any],
        cap_last: int,
        seed: str = "",
        env: dict[str, str | None] | None = None,
        stdio: Stdio | None = None,
    ) -> None:
        self.role = role
        self.fds = fds
        self.ready_w = ready_w
        self.cfg = cfg
        self.cap_last = cap_last
        self.seed = seed
        # a candidate's environment, as changes from Z's (``None``: unset; see environ.py)
        self.env = env or {}
        self.stdio = stdio  # a candidate's, unused, made by Z (zygote.py)
        # a JobContext (exec_child.run_job); ``base_env`` is only read (``template_env``
        # copies it), so not copied here: a copy cost every box ~20 page faults
        #: an image template's (uid, gid, working dir): the box runs in the image's root
        self.image = image_settings(cfg)
        self.sandbox_dir = SANDBOX_DIR if self.image is None else self.image[2]
        self.tmp_dir = "/tmp"
        self.base_env: dict[str, str] = cfg.get("base_env") or {}


def box_main(spec: BoxSpec) -> None:  # pragma: no cover - runs in the cloned box
    """The box's life; never returns."""
    try:
        set_name(f"col-{spec.role}")
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            _signal.signal(sig, _signal.SIG_DFL)  # (not signal.signal: its enums cost pages)
        _signal.set_wakeup_fd(-1)
        os.setsid()
        if spec.role == "image-zygote":  # an image's warm fork-server: its own way in
            from .image_zygote_box import become_image_zygote

            become_image_zygote(spec)
        ready = _harden(spec)
        if spec.role == "candidate":
            _prepare_candidate(spec)
        else:
            prctl(PR_SET_DUMPABLE, 0)  # the init: the exec cannot read its memory
        if ready >= 0:
            os.write(ready, b"ok")
            os.close(ready)
    except BaseException as exc:
        said = f"error {type(exc).__name__}: {exc}".encode()[:4000]
        # a candidate says so on its ready pipe, an exec box on its status pipe
        # (_harden keeps both fields pointing at where the pipes are)
        with contextlib.suppress(OSError):
            os.write(spec.ready_w if spec.role == "candidate" else spec.fds[4], said)
        os._exit(1)
    try:
        if spec.role == "candidate":
            _run_candidate(spec)
        else:
            _exec_init(spec)
    except BaseException:
        log_exception("box")
    os._exit(1)


def _harden(spec: BoxSpec) -> int:  # pragma: no cover - in the box
    """Map the uid, mount ``/proc``, cover ``/.collimate``, keep only our fds, drop privileges.

    Returns the ready pipe's fd (``-1``: none, an exec box).
    """
    proc = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY)
    try:
        if spec.image is None:
            write_id_maps(proc, SANDBOX_ID, SANDBOX_ID, SANDBOX_ID)
        else:  # the image's user, as the sandbox uid (image_root.py)
            write_id_maps(proc, spec.image[0], SANDBOX_ID, SANDBOX_ID, spec.image[1])
    finally:
        os.close(proc)
    proc_dir = "/proc" if spec.image is None else SANDBOX_DIR + "/proc"
    mount("proc", proc_dir, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    mount(COVER_DIR, INTERNAL_DIR, None, MS_BIND, None)  # empty and read-only (members.py)
    if spec.image is not None:  # before anything of the candidate's runs
        enter_image_root(spec.image[2])
    # The master keeps fds 0..4 taken, so no received fd (nor ready_w) is below 5 and
    # the dup2s onto 0..n-1 (n <= 6, in order) never clobber one still to be moved.
    for target, fd in enumerate(spec.fds):
        os.dup2(fd, target)
    ready = -1
    if spec.ready_w >= 0:
        ready = len(spec.fds)
        os.dup2(spec.ready_w, ready)
        os.set_inheritable(ready, False)
    os.closerange(len(spec.fds) + (ready >= 0), 1 << 16)
    spec.fds, spec.ready_w = list(range(len(spec.fds))), ready  # where they are now
    drop_all_capabilities(spec.cap_last, bounding=True)
    # after the mounts (a fenced process may not change its mounts), before seccomp
    spec.cfg["_fence"].apply()  # its writable_paths; a light session has no network
    load_seccomp(spec.cfg["_seccomp"])  # prepared by the master
    return ready


def _prepare_candidate(spec: BoxSpec) -> None:  # pragma: no cover - in the box
    """As the factory's spawned processes: limits, cwd, env, seed (``factory_link``)."""
    for target in range(len(spec.fds)):
        os.set_inheritable(target, True)
    _signal.signal(signal.SIGPIPE, _signal.SIG_IGN)  # as a fresh interpreter has them
    _signal.signal(signal.SIGXFSZ, _signal.SIG_IGN)
    _signal.signal(signal.SIGINT, _signal.default_int_handler)
    apply_limits(spec.cfg["limits"])
    os.umask(0o022)
    os.chdir(spec.sandbox_dir)
    amend_environ(spec.env)  # from Z's, which every box shares: the master's changes
    apply_python_seed(spec.seed)


def _run_candidate(spec: BoxSpec) -> None:  # pragma: no cover - in the box
    """Read the program from fd 0 (``marshal`` of a code object) and run it as ``__main__``."""
    import marshal

    data = bytearray()
    while True:
        chunk = os.read(0, 65536)  # (a few bytes: a larger buffer costs this fresh fork faults)
        if not chunk:
            break
        data += chunk
    code = marshal.loads(bytes(data))
    del data
    os._exit(run_main(code, "<stdin>", spec.stdio))


def _exec_init(spec: BoxSpec) -> None:  # pragma: no cover - in the box
    """pid 1 of an exec box: run a job, reap, report its status; again while the master
    keeps the box for the session's next exec (see the module's docstring)."""
    os.set_inheritable(CTL_FD, False)
    pristine = True  # read no job yet (a Python job is read by its own fork)
    for served in range(1, MAX_EXECS_PER_BOX + 1):
        status, read = _run_next(spec, pristine)
        pristine = pristine and not read
        kill_and_reap_all()  # nothing of the exec may write after its reply (a fork may freeze next)
        write_all(4, str(status).encode())
        # "idle" goes before the status pipe closes: when the worker hangs up, the
        # master finds it already said (``standby.py``)
        again = served < MAX_EXECS_PER_BOX and _fit_for_another(spec) and _say_idle(pristine)
        os.close(4)  # the worker replies now, not once our address space is torn down
        if not again or not _next_pipes():
            break
    os._exit(0)


def _run_next(spec: BoxSpec, pristine: bool) -> tuple[int, bool]:  # pragma: no cover - in the box
    """Run the job in the job pipe: its wait status, and whether this process read it.

    The worker writes the job's kind first: ``f``, Python code, which a fork of this
    interpreter reads and runs (this process never reads it), or ``s``, a program of its
    own, which this process reads and spawns (else forks, if the limits forbid a spawn:
    that fork execs the program before any of the job's code runs).
    """
    kind = os.read(0, 1)
    if kind == b"f":
        if not pristine:  # (the master never sends one) leave it unread: the worker
            os._exit(1)  # runs it in a fresh box
        return _fork_job(spec, None), False
    header, payload = read_frame(0)
    job = ExecJob(header, payload)
    return (run_spawned(spec, job) if spawnable(spec, job) else _fork_job(spec, job)), True


def _fit_for_another(spec: BoxSpec) -> bool:
    """Whether the limits the init may have taken (a spawned job's) let it serve again."""
    limits = spec.cfg["limits"]
    cpu = os.times()
    cpu_limit = int(limits["cpu_seconds"])  # RLIMIT_CPU counts the init's own CPU, all execs long
    room = int(limits["address_space_bytes"])
    return (
        (cpu_limit < 0 or (cpu.user + cpu.system) * 2 < cpu_limit)
        and int(limits["open_files"]) >= 16
        and (room < 0 or room >= address_space_used() + _NEXT_JOB_ROOM)
    )


def _say_idle(pristine: bool) -> bool:  # pragma: no cover - in the box
    try:  # (a master that hung up kills the box anyway)
        os.write(CTL_FD, b"idle pristine" if pristine else b"idle")
    except OSError:
        return False
    return True


def _next_pipes() -> bool:  # pragma: no cover - in the box
    """Wait for the next exec's pipes and put them on fds 0..4, as a fresh box has them."""
    line = socket.socket(fileno=CTL_FD)
    try:
        _msg, fds, _flags, _addr = socket.recv_fds(line, 16, 4)
    except OSError:
        return False
    finally:
        line.detach()
    if fds != [0, 1, 2, 3]:  # (fds 0..4 are closed: the pipes land on the lowest four)
        for fd in fds:
            os.close(fd)
        return False  # the master hung up, or sent what no master sends
    os.dup2(3, 4)  # job 0, output 1, seed 2, status 3 -> job 0, output 1 and 2, seed 3, status 4
    os.dup2(2, 3)
    os.dup2(1, 2)
    return True


def _fork_job(spec: BoxSpec, job: ExecJob | None) -> int:  # pragma: no cover - in the box
    """Run ``job`` in a fork of this warm interpreter (Python code runs in it); its wait status.

    ``None``: the fork reads the job from the job pipe itself. Closes fds 0..3 (the job
    pipe, the output, the seed pipe) once the fork has them.
    """
    devnull = os.open(os.devnull, os.O_RDWR)
    pid = os.fork()
    if pid == 0:
        try:
            if job is None:
                job = ExecJob(*read_frame(0))
            os.setsid()
            prctl(PR_SET_DUMPABLE, 1)  # like any freshly started process
            os.dup2(devnull, 0)
            os.closerange(4, 1 << 16)  # the status pipe
            os.set_inheritable(3, False)
            for sig in EXEC_DEFAULT_SIGNALS:
                _signal.signal(sig, _signal.SIG_DFL)
        except BaseException:
            os._exit(126)
        run_job(spec, job)
    if job is not None:
        job.drop_payload()
    os.close(devnull)
    for fd in (0, 1, 2, 3):
        os.close(fd)
    return reap_until(pid)
