"""An exec box's job that runs no Python here: spawned, without a copy of the warm image.

An exec box's init (``box.py``) forks the exec process from the warm interpreter it is
when the exec runs Python code in it. A shell command, argv lists, or a program for another
interpreter replace that process with a new program at once, so copying the warm image's
page tables for it (and tearing them down again at its ``execve``) is wasted work, about a
third of a no-op shell exec. Here the init does what the exec child would before its
``execve`` (rlimits, umask, cwd, files, environment, seed acknowledgement: ``exec_child``'s
``prepare_job``) and starts the program with ``posix_spawn`` (glibc: ``clone(CLONE_VM |
CLONE_VFORK)`` + ``execve``, allowed by the seccomp filter) as a new session with default
signal dispositions, stdin on ``/dev/null``, stdout and stderr on the exec's output, and no
other descriptor: what the exec process of a forked child gets.

Two limits decide, before anything runs, that a job is forked as before instead: the init
takes the exec's rlimits itself, and glibc maps a small stack for the spawn, so an address
space limit close to the init's own size, or a one-process limit, would refuse it.

>>> from collimate_rl.node.runtime._sandbox.exec_child import ExecJob
>>> class Ctx:
...     cfg = {"limits": {"processes": 64, "address_space_bytes": 4 << 30}}
>>> job = ExecJob({"seed": "0", "timeout": 1, "command": ":"}, b"")
>>> spawnable(Ctx(), job, mapped_bytes=100 << 20)
True
>>> spawnable(Ctx(), ExecJob({"seed": "0", "timeout": 1, "code": "pass"}, b""), 100 << 20)
False
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from .common import reap_until
from .exec_child import (
    EXEC_DEFAULT_SIGNALS,
    ExecJob,
    JobContext,
    acknowledge_seed,
    argv_failed,
    commands_exit_code,
    prepare_job,
    say_setup_failed,
    write_code_file,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

#: What the init may still map after taking the exec's address space limit (the spawn's
#: stack, the interpreter's own small allocations), with room to spare.
_HEADROOM = 16 << 20


def runs_python_here(cfg: dict[str, Any], command: object, commands: object) -> bool:
    """Whether an exec runs Python code in the box's warm interpreter (a fork of it), not a
    program of its own (a shell command, argv lists, another interpreter's program).

    >>> runs_python_here({"interpreter": "python3"}, None, None)
    True
    >>> runs_python_here({"interpreter": "python3"}, ":", None)
    False
    """
    if cfg.get("image"):  # the image's own python3, never the node's
        return False
    return command is None and commands is None and cfg.get("interpreter", "python3") == "python3"


def spawnable(ctx: JobContext, job: ExecJob, mapped_bytes: int | None = None) -> bool:
    """Whether ``job`` replaces its process with another program and its limits let the
    init spawn it (``mapped_bytes``: the init's address space, read from ``/proc``)."""
    if runs_python_here(ctx.cfg, job.command, job.commands):
        return False
    limits = ctx.cfg["limits"]
    if mapped_bytes is None:
        mapped_bytes = address_space_used()
    return bool(
        limits["processes"] >= 2 and limits["address_space_bytes"] > mapped_bytes + _HEADROOM
    )


def run_spawned(ctx: JobContext, job: ExecJob) -> int:  # pragma: no cover - in an exec box
    """Run ``job`` as spawned processes; the wait status of the exec, as ``waitpid`` gives it.

    Closes fds 0..3 (the job pipe, the output, the seed pipe) before it returns.
    """
    devnull = os.open(os.devnull, os.O_RDWR)
    os.set_inheritable(4, False)  # the status pipe stays the init's
    try:
        try:
            env = prepare_job(ctx, job)
            if job.command is None and job.commands is None:
                code_path = write_code_file(ctx, job, env)
            acknowledge_seed(job.seed)
        except BaseException as exc:
            with contextlib.suppress(OSError):  # the seed pipe, unless already closed
                os.close(3)
            say_setup_failed(exc)
            return 126 << 8
        if job.command is not None:
            return _spawn_and_wait("/bin/sh", ["sh", "-c", job.command], env, devnull)
        if job.commands is not None:
            codes = _exit_codes(job.commands, env, devnull)
            return commands_exit_code(codes) << 8
        interp = ctx.cfg.get("interpreter", "python3")
        return _spawn_and_wait(interp, [interp, code_path], env, devnull, search=True)
    finally:
        for fd in (devnull, 0, 1, 2):
            os.close(fd)


def _exit_codes(
    commands: list[list[str]], env: dict[str, str], devnull: int
) -> Iterator[int]:  # pragma: no cover - in an exec box
    for argv in commands:
        if argv:
            status = _spawn_and_wait(argv[0], list(argv), env, devnull, search=True)
            yield os.waitstatus_to_exitcode(status)


def _spawn_and_wait(
    path: str, argv: list[str], env: dict[str, str], devnull: int, search: bool = False
) -> int:  # pragma: no cover - in an exec box
    """Spawn ``argv`` as the exec's process and reap it (orphans come to us, pid 1, too).

    ``search``: look ``path`` up on the exec's ``PATH`` (as ``execvpe`` does in a forked
    job; ``posix_spawnp`` would search this process's own).
    """
    try:
        pid = os.posix_spawn(
            on_path(path, env) if search else path,
            argv,
            env,
            file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0)],
            setsid=True,
            setsigmask=(),
            setsigdef=EXEC_DEFAULT_SIGNALS,
        )
    except OSError as exc:
        return argv_failed(argv[0], exc) << 8
    return reap_until(pid)


def on_path(name: str, env: dict[str, str]) -> str:
    """``name`` as found on ``env``'s ``PATH`` (unchanged when it names a path or is not
    found: the spawn then fails as the shell would, ``command not found``).

    >>> on_path("sh", {"PATH": "/nonexistent:/bin"})
    '/bin/sh'
    """
    if "/" in name:
        return name
    for folder in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":"):
        candidate = os.path.join(folder or ".", name)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return name


def address_space_used() -> int:  # pragma: no cover - in an exec box
    """Bytes this process has mapped: what ``RLIMIT_AS`` counts."""
    fd = os.open("/proc/self/statm", os.O_RDONLY)  # (not open(): fewer pages copied)
    try:
        return int(os.read(fd, 256).split()[0]) * os.sysconf("SC_PAGE_SIZE")
    finally:
        os.close(fd)
