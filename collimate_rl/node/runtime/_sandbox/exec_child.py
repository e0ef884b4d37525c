"""The exec child: a fork of the session server that runs one exec, then exits.

It hides the node's internals in a private mount namespace, drops every
capability, sets ``no_new_privs``, applies the Landlock fence (``landlock.py``), loads
the seccomp filter, applies the
rlimits, writes the exec's files byte-exact, seeds, acknowledges the seed
on fd 3 and runs the command, the argv list or the ``code`` (in this warm
interpreter for ``python3`` templates).
"""

# ruff: noqa: SIM105, SIM115
# (plain try/except/pass and explicit fd handling: this runs in a fork child)
from __future__ import annotations

import _signal
import os
import signal
import socket
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from .environ import replace_environ, template_env
from .factory import run_as_main
from .framing import write_all
from .hardening import apply_limits, drop_all_capabilities, hide_internals_and_drop_capabilities
from .image_root import enter_image_root
from .landlock import Fence
from .layout import ZYGOTE_ENV, ZYGOTE_FD
from .seccomp import load_seccomp
from .seeding import apply_python_seed
from .syscalls import PR_SET_PDEATHSIG, prctl

#: Signals an exec process starts with at their default: Python handles SIGINT and ignores
#: SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across ``execve``.
EXEC_DEFAULT_SIGNALS = (signal.SIGCHLD, signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ)

if TYPE_CHECKING:
    from typing import Protocol

    class SessionServer(Protocol):
        """What an exec child reads of its session server (``session_server.py``, which
        imports this module: a protocol, not an import, keeps the two apart)."""

        cfg: dict[str, Any]
        isolated: bool
        sandbox_dir: str
        tmp_dir: str
        cap_last: int
        seccomp: bytes
        fence: Fence
        base_env: dict[str, str]

        def close_fds(self) -> None: ...


def _run_code_inprocess(source: str, path: str, env: dict[str, str], sandbox: str) -> int:
    """Run ``source`` (the code file ``path`` holds) as ``__main__`` in this warm process.

    (Plain ``_signal`` calls, stdio opened line-buffered (``1``) at once, the source not
    read back: in a fresh fork every object a step touches costs a page copy.)
    """
    # as a fresh interpreter would have them
    _signal.signal(signal.SIGPIPE, _signal.SIG_IGN)
    _signal.signal(signal.SIGXFSZ, _signal.SIG_IGN)
    _signal.signal(signal.SIGINT, _signal.default_int_handler)
    # the file as Python reads it: universal newlines
    source = source.replace("\r\n", "\n").replace("\r", "\n")
    sys.stdout = open(1, "w", 1, encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", 1, encoding="utf-8", errors="backslashreplace", closefd=False)
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
    return int(run_as_main(source, path))


def _run_argv(argv: list[str], env: dict[str, str]) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            os.execvpe(argv[0], argv, env)
        except BaseException as exc:
            os._exit(argv_failed(argv[0], exc))
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def argv_failed(name: str, exc: BaseException) -> int:
    """Say why ``name`` could not start, on the exec's stderr; the shell's exit code for it."""
    missing = isinstance(exc, FileNotFoundError)
    try:
        write_all(2, f"{name}: {'command not found' if missing else exc}\n".encode())
    except OSError:  # nobody reads the output any more: the code still says it
        pass
    return 127 if missing else 126


def commands_exit_code(exit_codes: Iterable[int]) -> int:
    """Run argv lists in turn (``exit_codes`` yields each one's ``waitstatus_to_exitcode``,
    lazily) until one fails; the exit code of the exec that ran them."""
    rc = 0
    for rc in exit_codes:
        if rc != 0:
            break
    return rc & 0xFF if rc >= 0 else 128 - rc


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


class JobContext(Protocol):
    """What running a job needs from its session (a session server, or a box's init)."""

    cfg: dict[str, Any]
    sandbox_dir: str
    tmp_dir: str
    base_env: dict[str, str]


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
    try:
        sock.close()
        for sig in (*EXEC_DEFAULT_SIGNALS, signal.SIGTERM):
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
        if sv.isolated and sv.cfg.get("image"):  # into the image's root, then as below
            enter_image_root(sv.sandbox_dir)
            drop_all_capabilities(sv.cap_last, bounding=False)
            sv.fence.apply()  # the template's writable_paths, as seen from the image's root
            load_seccomp(sv.seccomp)
        elif sv.isolated:
            hide_internals_and_drop_capabilities(sv.cap_last)
            sv.fence.apply()  # the template's writable_paths
            load_seccomp(sv.seccomp)
    except BaseException as exc:
        _setup_failed(exc)
    run_job(sv, job, zfd >= 0)


def _setup_failed(exc: BaseException) -> None:  # pragma: no cover - in a child
    say_setup_failed(exc)
    os._exit(126)


def say_setup_failed(exc: BaseException) -> None:
    """Say on the exec's stderr that its set-up failed (the exec never ran)."""
    try:
        write_all(2, f"collimate: exec setup failed: {exc!r}\n".encode())
    except BaseException:  # nobody reads the output any more
        pass


def prepare_job(ctx: JobContext, job: ExecJob, has_factory: bool = False) -> dict[str, str]:
    """Apply the exec's rlimits, umask and cwd, write its files byte-exact; its environment.

    Runs in the process that will run the job (or, for a spawned job, in its parent: see
    ``spawned_job.py``), already hardened.
    """
    cfg = ctx.cfg
    sandbox = ctx.sandbox_dir
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
            write_all(fd, data)
        finally:
            os.close(fd)
        del data
    job.drop_payload()  # defense in depth only: freed memory is not zeroed
    env = template_env(cfg, ctx.base_env)
    env.update({k: v for k, v in job.env})
    env["COLLIMATE_SEED"] = job.seed
    if has_factory:
        env[ZYGOTE_ENV] = str(ZYGOTE_FD)
    return env


def write_code_file(ctx: JobContext, job: ExecJob, env: dict[str, str]) -> str:
    """Write the exec's ``code`` where its interpreter reads it (named in ``env``); the path."""
    # (pids repeat across boxes of one session: every box has its own pid namespace)
    code_path = os.path.join(ctx.tmp_dir, f"colcode_{os.getpid()}_{os.urandom(6).hex()}.py")
    fd = os.open(code_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # (as open() makes it)
    try:
        write_all(fd, (job.code or "").encode("utf-8", "surrogateescape"))
    finally:
        os.close(fd)
    env["COLLIMATE_CODE_FILE"] = code_path
    return code_path


def acknowledge_seed(seed: str) -> None:
    """Tell the node the exec was seeded (fd 3), then close the pipe: the exec never sees it."""
    write_all(3, seed.encode())
    os.close(3)


def run_job(ctx: JobContext, job: ExecJob, has_factory: bool = False) -> None:  # pragma: no cover
    """In a hardened child with its stdio and the seed pipe (fd 3) in place: run ``job``.

    Applies the rlimits, writes the files byte-exact, sets the env, seeds and
    acknowledges the seed, then runs the command, the argv list or the code
    (in this warm interpreter for ``python3`` templates). Never returns.
    """
    rc = 126
    try:
        env = prepare_job(ctx, job, has_factory)
        if job.command is not None:
            replace_environ(env)
            acknowledge_seed(job.seed)
            os.execve("/bin/sh", ["sh", "-c", job.command], env)
        if job.commands is not None:
            replace_environ(env)
            acknowledge_seed(job.seed)
            os._exit(commands_exit_code(_run_argv(list(a), env) for a in job.commands if a))
        code_path = write_code_file(ctx, job, env)
        replace_environ(env)
        interp = ctx.cfg.get("interpreter", "python3")
        if interp == "python3" and not ctx.cfg.get("image"):
            apply_python_seed(job.seed)
            acknowledge_seed(job.seed)
            rc = _run_code_inprocess(job.code or "", code_path, env, ctx.sandbox_dir)
            try:
                os.unlink(code_path)
            except OSError:
                pass
            os._exit(rc)
        acknowledge_seed(job.seed)
        os.execvpe(interp, [interp, code_path], env)
    except BaseException as exc:
        say_setup_failed(exc)
        os._exit(rc)
    os._exit(rc)
