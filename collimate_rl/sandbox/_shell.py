"""A daemon-shaped client that runs commands with ``sh`` in temp dirs: NOT a sandbox.

For doctests and protocol tests only. It speaks the daemon-parity surface the
:class:`~collimate_rl.sandbox.Sandbox` uses (``create_session``,
``session_exec``, ``get_session``, ``delete_session``, and the local node's
``fork_session``), keeps each session's files in its own temporary directory
(the exec's working directory) and copies that directory to fork. Commands
run as the current user on this machine, without any isolation.

>>> client = ShellClient()
>>> sid = client.create_session("python3")["session_id"]
>>> client.session_exec(sid, command="echo hi > f; cat f")["stdout"]
'hi\\n'
>>> client.delete_session(sid)["deleted"]
True
>>> client.close()
"""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread

from collimate_rl.errors import CollimateNotFoundError, CollimateUsageError

__all__ = ["AsyncShellClient", "ShellClient"]

_OUTPUT_CAP = 16 * 1024 * 1024


class ShellClient:
    """Sessions as temp dirs, execs as ``sh -c`` subprocesses (see the module docstring)."""

    def __init__(self, *, templates: Sequence[str] = ("python3",)) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="colshell_"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._root, True)
        self._templates = set(templates)
        self._sessions: dict[str, tuple[str, Path, float, int]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # -- daemon-parity surface -------------------------------------------------

    def create_session(
        self, template_id: str, *, egress: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Create a session (an empty directory)."""
        if template_id not in self._templates:
            raise CollimateNotFoundError(
                f"HTTP 404: no template {template_id!r}", status=404, error_code="no_template"
            )
        with self._lock:
            sid = f"sh-{next(self._ids)}"
            home = self._root / sid
            home.mkdir()
            self._sessions[sid] = (template_id, home, time.monotonic(), 0)
        return {
            "session_id": sid,
            "template_id": template_id,
            "fork_time_ms": 0.0,
            "create_time_ms": 0.1,
        }

    def _home(self, session_id: str) -> Path:
        with self._lock:
            entry = self._sessions.get(session_id)
        if entry is None:
            raise CollimateNotFoundError(
                f"HTTP 404: no such session {session_id!r}",
                status=404,
                error_code="no_such_session",
            )
        return entry[1]

    def get_session(self, session_id: str) -> dict[str, Any]:
        """SessionInfo of a live session; 404 ``no_such_session`` otherwise."""
        self._home(session_id)
        template_id, _, born, count = self._sessions[session_id]
        age = time.monotonic() - born
        return {
            "session_id": session_id,
            "template_id": template_id,
            "age_secs": age,
            "idle_secs": 0.0,
            "exec_count": count,
        }

    def session_exec(
        self,
        session_id: str,
        *,
        command: str | None = None,
        code: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
    ) -> dict[str, Any]:
        """Run one exec in the session's directory, stderr merged into stdout."""
        home = self._home(session_id)
        if command is None and code is None and commands is None:
            raise CollimateUsageError("one of command/code/commands is required")
        for item in files or ():
            target = home / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(item["content"])
        if command is not None:
            argv = ["sh", "-c", command]
        elif commands is not None:
            argv = ["sh", "-c", "\n".join(shlex.join(cmd) for cmd in commands)]
        else:
            (home / ".colcode.py").write_text(code or "")
            argv = [sys.executable, ".colcode.py"]
        start = time.monotonic()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        if seed is not None:
            env["COLLIMATE_SEED"] = seed
        try:
            proc = subprocess.run(
                argv,
                cwd=home,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=timeout_seconds,
                check=False,
            )
            out, exit_code = proc.stdout[:_OUTPUT_CAP], proc.returncode
        except subprocess.TimeoutExpired:
            out, exit_code = f"timeout after {float(timeout_seconds)}s".encode(), -1
        with self._lock:
            t, h, born, count = self._sessions[session_id]
            self._sessions[session_id] = (t, h, born, count + 1)
        ms = round((time.monotonic() - start) * 1000, 2)
        return {
            "stdout": out.decode("utf-8", "replace"),
            "stderr": "",
            "exit_code": exit_code,
            "fork_time_ms": 0.0,
            "exec_time_ms": ms,
            "total_time_ms": ms,
            "seed": seed or os.urandom(32).hex(),
            "seed_ack": "off",
        }

    def delete_session(self, session_id: str) -> dict[str, Any]:
        """Delete a session; never raises."""
        with self._lock:
            entry = self._sessions.pop(session_id, None)
        if entry is not None:
            shutil.rmtree(entry[1], ignore_errors=True)
        return {"deleted": entry is not None, "session_id": session_id}

    def fork_session(self, session_id: str, count: int) -> dict[str, Any]:
        """The local node's fork extension: ``count`` copies of the session's files."""
        home = self._home(session_id)
        template_id = self._sessions[session_id][0]
        children = []
        for _ in range(count):
            child = self.create_session(template_id)
            sid = child["session_id"]
            shutil.rmtree(self._root / sid)
            shutil.copytree(home, self._root / sid, symlinks=True)
            children.append({"session_id": sid, "fork_time_ms": 0.0})
        return {"parent": session_id, "children": children}

    def list_sessions(self) -> list[dict[str, Any]]:
        """SessionInfo of every live session."""
        with self._lock:
            ids = list(self._sessions)
        return [self.get_session(sid) for sid in ids]

    def close(self) -> None:
        """Delete every session and the root directory."""
        with self._lock:
            self._sessions.clear()
        self._cleanup()


class AsyncShellClient:
    """The async twin of :class:`ShellClient` (each call runs in a worker thread)."""

    def __init__(self, *, templates: Sequence[str] = ("python3",)) -> None:
        self.sync = ShellClient(templates=templates)

    async def create_session(
        self, template_id: str, *, egress: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """See :meth:`ShellClient.create_session`."""
        return await anyio.to_thread.run_sync(lambda: self.sync.create_session(template_id))

    async def get_session(self, session_id: str) -> dict[str, Any]:
        """See :meth:`ShellClient.get_session`."""
        return await anyio.to_thread.run_sync(self.sync.get_session, session_id)

    async def session_exec(self, session_id: str, **kwargs: Any) -> dict[str, Any]:
        """See :meth:`ShellClient.session_exec`."""
        return await anyio.to_thread.run_sync(lambda: self.sync.session_exec(session_id, **kwargs))

    async def delete_session(self, session_id: str) -> dict[str, Any]:
        """See :meth:`ShellClient.delete_session`."""
        return await anyio.to_thread.run_sync(self.sync.delete_session, session_id)

    async def fork_session(self, session_id: str, count: int) -> dict[str, Any]:
        """See :meth:`ShellClient.fork_session`."""
        return await anyio.to_thread.run_sync(self.sync.fork_session, session_id, count)

    async def aclose(self) -> None:
        """See :meth:`ShellClient.close`."""
        self.sync.close()
