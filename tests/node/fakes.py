"""A fake, UNISOLATED runtime for testing the HTTP layer without bwrap.

Sessions are plain folders; execs are asyncio subprocesses run in them;
fork copies the folder. It honours the ``base.py`` contract closely enough
(timeouts, output cap, seeds, SessionBusy/SessionLost) for the node's tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from collimate_rl.node.runtime.base import (
    ExecOutcome,
    ExecSpec,
    Isolation,
    Limits,
    RuntimeError_,
    SessionBusy,
    SessionHandle,
    SessionLost,
    TemplateSpec,
)

_BOOTSTRAP = (
    "import os, random, runpy, sys\n"
    "random.seed(int(os.environ['COLLIMATE_SEED'], 16))\n"
    "sys.argv = [os.environ['COLLIMATE_CODE_FILE']]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


class FakeSession:
    def __init__(self, runtime: FakeRuntime, session_id: str, root: Path) -> None:
        self._runtime = runtime
        self._id = session_id
        self.root = root
        self.active = 0
        self.closed = False
        self.dead = False
        self._procs: set[asyncio.subprocess.Process] = set()

    @property
    def session_id(self) -> str:
        return self._id

    def kill(self) -> None:
        """Simulate the sandbox dying underneath the node."""
        self.dead = True
        for proc in list(self._procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def _path(self, path: str) -> Path:
        rel = path.removeprefix("/sandbox/") if path.startswith("/sandbox/") else path
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise ValueError(f"file path {path!r} must be relative or under /sandbox")
        return self.root / rel

    def _argv(self, spec: ExecSpec) -> list[str]:
        if spec.command is not None:
            return ["/bin/sh", "-c", spec.command]
        if spec.commands is not None:
            return ["/bin/sh", "-c", "\n".join(shlex.join(argv) for argv in spec.commands)]
        code_file = self.root / f".code_{os.urandom(4).hex()}.py"
        code_file.write_text(spec.code or "")
        return [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, str(code_file)]

    async def exec(self, spec: ExecSpec) -> ExecOutcome:
        if self.closed or self.dead:
            raise SessionLost(f"session {self._id} is gone")
        if self._runtime.dry_run:  # for fuzzing: never run generated commands unsandboxed
            return ExecOutcome(exit_code=0, output=b"", exec_time_ms=0.0, seed_ack="no-ack")
        self.active += 1
        try:
            return await self._exec(spec)
        finally:
            self.active -= 1

    async def _exec(self, spec: ExecSpec) -> ExecOutcome:
        for path, content in spec.files:
            target = self._path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        argv = self._argv(spec)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "COLLIMATE_SEED": spec.seed,
            "COLLIMATE_CODE_FILE": argv[-1]
            if spec.command is None and spec.commands is None
            else "",
        }
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=self.root,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        self._procs.add(proc)
        cap = self._runtime.limits.output_cap_bytes
        chunks: list[bytes] = []
        size = 0
        truncated = False

        async def pump() -> None:
            nonlocal size, truncated
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                if size < cap:
                    chunks.append(chunk[: cap - size])
                    truncated = truncated or size + len(chunk) > cap
                else:
                    truncated = True
                size += len(chunk)
            await proc.wait()

        timed_out = False
        try:
            await asyncio.wait_for(pump(), spec.timeout_seconds)
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        finally:
            self._procs.discard(proc)
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if self.dead or self.closed:
            raise SessionLost(f"session {self._id} died during the exec")
        output = b"".join(chunks)
        exit_code = proc.returncode if proc.returncode is not None else -1
        if timed_out:
            exit_code = -1
            output += f"timeout after {float(spec.timeout_seconds)}s".encode()
        return ExecOutcome(
            exit_code=exit_code,
            output=output,
            exec_time_ms=(time.perf_counter() - start) * 1000.0,
            timed_out=timed_out,
            truncated=truncated,
            seed_ack="no-ack",
        )

    async def fork(self, child_ids: Sequence[str]) -> list[SessionHandle]:
        if self.dead or self.closed:
            raise SessionLost(f"session {self._id} is gone")
        if self.active:
            raise SessionBusy(f"session {self._id} has an exec running")
        if self._runtime.fork_delay:
            await asyncio.sleep(self._runtime.fork_delay)
        children: list[SessionHandle] = []
        try:
            for child_id in child_ids:
                child_root = self._runtime.root / child_id
                await asyncio.to_thread(shutil.copytree, self.root, child_root, symlinks=True)
                child = FakeSession(self._runtime, child_id, child_root)
                self._runtime.sessions[child_id] = child
                children.append(child)
        except BaseException:
            for done in children:
                await done.close()
            raise
        return children

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for proc in list(self._procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        self._runtime.sessions.pop(self._id, None)
        await asyncio.to_thread(shutil.rmtree, self.root, True)


class FakeRuntime:
    """Unisolated runtime with templates ``python3`` and ``py``."""

    def __init__(
        self,
        isolation: str | None = None,
        *,
        state_dir: Path | None = None,
        limits: Limits | None = None,
        templates: Sequence[str] = ("python3", "py"),
        create_delay: float = 0.0,
        dry_run: bool = False,
    ) -> None:
        self.isolation = Isolation.NONE
        self.limits = limits or Limits()
        self._state_dir = Path(state_dir) if state_dir is not None else None
        self._templates = list(templates)
        self.create_delay = create_delay
        self.dry_run = dry_run
        self.fork_delay = 0.0
        self.root = Path()
        self.started = False
        self.closed = False
        self.sessions: dict[str, FakeSession] = {}
        self.created = 0

    async def start(self) -> None:
        delay = float(os.environ.get("FAKE_RUNTIME_START_DELAY", "0"))
        if delay:
            print("fake runtime starting", file=sys.stderr, flush=True)
            await asyncio.sleep(delay)
        if os.environ.get("FAKE_RUNTIME_FAIL_START"):
            raise RuntimeError_("template host failed to start (simulated)")
        if self._state_dir is not None:
            self._state_dir.mkdir(parents=True, exist_ok=True)
            self.root = self._state_dir
        else:
            self.root = Path(tempfile.mkdtemp(prefix="fake-runtime-"))
        self.started = True

    def templates(self) -> list[str]:
        return list(self._templates)

    async def add_template(self, spec: TemplateSpec) -> None:
        self._templates.append(spec.template_id)

    async def create_session(self, template_id: str, session_id: str) -> SessionHandle:
        if not self.started or self.closed:
            raise RuntimeError_("runtime not running")
        if template_id not in self._templates:
            raise KeyError(template_id)
        if self.create_delay:
            await asyncio.sleep(self.create_delay)
        root = self.root / session_id
        root.mkdir()
        session = FakeSession(self, session_id, root)
        self.sessions[session_id] = session
        self.created += 1
        return session

    async def bake(
        self, template_id: str, base: str, setup_commands: Sequence[str], *, network: bool = True
    ) -> TemplateSpec:
        raise RuntimeError_("bake is not supported by the fake runtime")

    async def bake_image(
        self, spec: TemplateSpec, setup_commands: Sequence[str], *, network: bool = False
    ) -> TemplateSpec:
        raise RuntimeError_("bake_image is not supported by the fake runtime")

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for session in list(self.sessions.values()):
            await session.close()
        if self.started:
            shutil.rmtree(self.root, ignore_errors=True)


def create_fake_runtime(
    isolation: str | None = None, *, state_dir: Path | None = None
) -> FakeRuntime:
    """Factory for ``serve --runtime-factory tests.node.fakes:create_fake_runtime``."""
    return FakeRuntime(isolation, state_dir=state_dir)
