"""Host side of the local runtime: template hosts, sessions and the Runtime.

One template host (a bwrap container running the supervisor's master) per
template; sessions are processes forked by that master. The host talks to
the master and to every session server over unix sockets in the state dir.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import json
import logging
import os
import re
import secrets
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import _recovery
from . import bwrap as bw
from ._warm import warm_modules
from .base import (
    ExecOutcome,
    ExecSpec,
    Isolation,
    Limits,
    RuntimeError_,
    ServiceNotReady,
    ServiceSpec,
    SessionBusy,
    SessionHandle,
    SessionLost,
    TemplateSpec,
)
from .bridge import Bridge, ServiceFailed, read_bounded, wait_http
from .languages import LanguageTemplates
from .sandbox_uid import resolve_sandbox_uid
from .workers import WorkerPool, exec_header, grade_of, grade_request

log = logging.getLogger("collimate_rl.node.runtime")

__all__ = [
    "BUILTIN_TEMPLATE",
    "DEFAULT_PRELOAD",
    "MAX_FORK_DEPTH",
    "LocalRuntime",
    "LocalSession",
]

#: The built-in template id: the node's warm Python with numpy importable.
BUILTIN_TEMPLATE = "python3"
#: Alias ids that resolve to the built-in template (the SDK's local backend uses ``py``).
TEMPLATE_ALIASES = {"py": BUILTIN_TEMPLATE}
#: Every built-in template ``<id>`` has a networked twin ``<id><suffix>`` (``python3-net``):
#: the same container, sessions with the egress relay (see docs/egress.md).
NETWORK_TWIN_SUFFIX = "-net"
DEFAULT_PRELOAD: tuple[str, ...] = (
    "random",
    "json",
    "math",
    "re",
    "collections",
    "itertools",
    "functools",
    "typing",
    "importlib.util",
    "io",
    "os",
    "sys",
    "string",
    "heapq",
    "bisect",
    "dataclasses",
    "traceback",
    "types",
    "resource",
    "atexit",
)
#: Nested user namespaces are limited to 32 levels by the kernel: the host,
#: the template container and the first session take three; keep a margin.
MAX_FORK_DEPTH = 24

_SUPERVISOR_DIR = Path(__file__).resolve().parent / "_sandbox"
_SUPERVISOR = _SUPERVISOR_DIR / "supervisor.py"
_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
#: sun_path holds 108 bytes, the last one a NUL
_UNIX_PATH_MAX = 107
#: room for "master.sock" and session keys ("<base36>.sock")
_SOCKET_NAME_MAX = 16


# --------------------------------------------------------------------------
# wire helpers
# --------------------------------------------------------------------------


async def _call(
    path: str | Path,
    header: dict[str, Any],
    payload: bytes = b"",
    *,
    timeout: float | None = 60.0,
) -> tuple[dict[str, Any], bytes]:
    async def go() -> tuple[dict[str, Any], bytes]:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
        try:
            hdr = dict(header)
            if payload:
                hdr["payload_len"] = len(payload)
            data = json.dumps(hdr).encode()
            writer.write(struct.pack(">I", len(data)) + data)
            if payload:
                writer.write(payload)
            await writer.drain()
            (n,) = struct.unpack(">I", await reader.readexactly(4))
            reply: dict[str, Any] = json.loads(await reader.readexactly(n))
            plen = int(reply.get("payload_len", 0))
            body = await reader.readexactly(plen) if plen else b""
            return reply, body
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    if timeout is None:
        return await go()
    return await asyncio.wait_for(go(), timeout)


def _python_paths() -> tuple[Path, Path]:
    """The node's base interpreter and its prefix (real paths)."""
    exe = Path(getattr(sys, "_base_executable", None) or sys.executable)
    exe = exe.resolve()
    prefix = Path(sys.base_prefix).resolve()
    return exe, prefix


def _numpy_dirs() -> list[Path]:
    spec = importlib.util.find_spec("numpy")
    if spec is None or not spec.submodule_search_locations:
        return []
    pkg = Path(next(iter(spec.submodule_search_locations))).resolve()
    dirs = [pkg]
    libs = pkg.parent / "numpy.libs"
    if libs.is_dir():
        dirs.append(libs)
    return dirs


def _site_dirs() -> list[Path]:
    """The node environment's own site-packages (a venv's), not the base Python's."""
    import sysconfig

    base = Path(sys.base_prefix).resolve()
    out: list[Path] = []
    for key in ("purelib", "platlib"):
        path = Path(sysconfig.get_paths()[key]).resolve()
        if path.is_dir() and not path.is_relative_to(base) and path not in out:
            out.append(path)
    return out


def _search_path(python_bin: str, extra: Sequence[str]) -> str:
    """A sandbox's PATH: the node's Python first, then the template's toolchains."""
    return ":".join([python_bin, *extra, "/usr/local/bin", "/usr/bin", "/bin"])


#: Where shared site-packages appear inside a sandbox (``/opt/collimate/venv/<i>``).
SHARED_SITE_DIR = "/opt/collimate/venv"


def _limits_dict(limits: Limits) -> dict[str, int]:
    return {
        "cpu_seconds": limits.cpu_seconds,
        "address_space_bytes": limits.address_space_bytes,
        "processes": limits.processes,
        "file_size_bytes": limits.file_size_bytes,
        "open_files": limits.open_files,
        "session_disk_bytes": limits.session_disk_bytes,
        "output_cap_bytes": limits.output_cap_bytes,
    }


def _memcg_parent() -> Path | None:
    """Our own cgroup-v1 memory cgroup, if we are root and can create children in it."""
    if os.geteuid() != 0:
        return None
    base = Path("/sys/fs/cgroup/memory")
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            cg = base / parts[2].lstrip("/")
            if (cg / "memory.limit_in_bytes").exists() and os.access(cg, os.W_OK):
                return cg
    return None


def _mem_total() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


class _MemoryCgroup:
    """A cgroup-v1 memory cgroup around one template container (a safety net)."""

    def __init__(self, parent: Path, name: str, limit: int) -> None:
        self.path = parent / name
        self.path.mkdir()
        (self.path / "memory.limit_in_bytes").write_text(str(limit))
        self.procs = str(self.path / "cgroup.procs")

    def enter(self) -> None:
        """Called in the forked child before exec (still root)."""
        fd = os.open(self.procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    async def remove(self) -> None:
        for _ in range(400):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                await asyncio.sleep(0.005)
        log.warning("could not remove memory cgroup %s", self.path)


# --------------------------------------------------------------------------
# template host
# --------------------------------------------------------------------------


class TemplateHost:
    """One warm container (or, for ``none``, one plain process) per template."""

    def __init__(self, runtime: LocalRuntime, spec: TemplateSpec, index: int) -> None:
        self.runtime = runtime
        self.spec = spec
        self.dir = runtime.state_dir / "t" / str(index)
        self.sock_dir = self.dir / "socks"
        self.master_sock = self.sock_dir / "master.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.sessions: dict[str, LocalSession] = {}
        self.memcg: _MemoryCgroup | None = None
        #: the workers that run light sessions' execs and grades (``workers.py``)
        self.workers = WorkerPool(self.master, self.sock_dir)

    @property
    def light(self) -> bool:
        """Whether this template's sessions (without network) are light (see docs/fast-path.md)."""
        rt = self.runtime
        return rt.light_sessions and rt.isolation is Isolation.BWRAP and self.spec.service is None

    # -- bring-up
    def _launch(self) -> subprocess.Popen[bytes]:
        """Spawn the host process (synchronously, on the event-loop thread:
        bwrap's --die-with-parent is tied to the spawning thread)."""
        rt = self.runtime
        self.sock_dir.mkdir(parents=True, mode=0o700)
        os.chmod(self.dir, 0o711)
        rt.chown(self.sock_dir)
        isolated = rt.isolation is Isolation.BWRAP
        fds = bw.FdSet()
        launch: bw.Launch | None = None
        try:
            preexec: Callable[[], None] | None = None
            if isolated:
                argv = self._bwrap_argv(fds)
                launch = bw.launch_preexec(rt.sandbox_uid, self._exposed(), bwrap=rt.bwrap_path)
                preexec = launch
            else:
                argv = self._none_argv()
                # bwrap has --die-with-parent; the unisolated master must not
                # outlive a node that crashed either.
                preexec = _recovery.die_with_parent_preexec()
            memcg = rt.make_memcg(f"t{self.dir.name}")
            if memcg is not None:
                self.memcg = memcg
                drop = preexec

                def preexec() -> None:
                    memcg.enter()
                    if drop is not None:
                        drop()

            with open(self.dir / "stderr.log", "wb") as err:
                return subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    pass_fds=fds.fds,
                    close_fds=True,
                    start_new_session=True,
                    env=self._host_env(),
                    preexec_fn=preexec,
                )
        except (OSError, subprocess.SubprocessError) as exc:
            if not isolated or rt.bwrap_path is None:
                raise
            raise RuntimeError_(
                bw.start_failure(rt.bwrap_path, rt.sandbox_uid, launch, exc)
            ) from exc
        finally:
            fds.close()

    async def start(self) -> None:
        if len(os.fsencode(self.sock_dir)) + len("/") + _SOCKET_NAME_MAX > _UNIX_PATH_MAX:
            # connect() would fail with a bare "did not come up" 30 s later
            raise RuntimeError_(
                f"state dir {self.runtime.state_dir} is too long for the session sockets "
                f"inside it (unix socket paths are limited to {_UNIX_PATH_MAX} bytes); "
                "pass a shorter --state-dir"
            )
        self.proc = self._launch()
        self.runtime.note_host(self.proc.pid)
        deadline = time.monotonic() + 30.0
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError_(
                    f"template {self.spec.template_id!r}: sandbox host exited "
                    f"({self.proc.returncode}): {self._stderr_tail()}"
                )
            if self.master_sock.exists():
                try:
                    reply, _ = await _call(self.master_sock, {"op": "ping"}, timeout=10)
                    if reply.get("ok"):
                        return
                except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
                    pass
            if time.monotonic() > deadline:
                await self.stop()
                raise RuntimeError_(
                    f"template {self.spec.template_id!r}: sandbox host did not come up: "
                    f"{self._stderr_tail()}"
                )
            await asyncio.sleep(0.005)

    def _stderr_tail(self) -> str:
        try:
            return (self.dir / "stderr.log").read_text(errors="replace")[-2000:].strip()
        except OSError:
            return "(no stderr)"

    def _host_env(self) -> dict[str, str]:
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }

    def _config(
        self,
        *,
        layers: list[str],
        base_env: dict[str, str],
        sys_path: list[str],
        none_root: str | None,
    ) -> str:
        spec = self.spec
        cfg: dict[str, Any] = {
            "isolated": self.runtime.isolation is Isolation.BWRAP,
            "template_id": spec.template_id,
            "interpreter": spec.interpreter,
            "preload": list(DEFAULT_PRELOAD)
            + [m for m in spec.preload if m not in DEFAULT_PRELOAD],
            "env": [list(kv) for kv in spec.env],
            "limits": _limits_dict(self.spec.limits or self.runtime.limits),
            "layers": layers,
            "base_env": base_env,
            "sys_path": sys_path,
            "none_root": none_root,
            "warm_modules": warm_modules(spec.interpreter),
            "light": self.light,  # sessions as records, run in boxes (docs/fast-path.md)
        }
        if spec.service is not None:
            cfg["service"] = {"cmd": spec.service.cmd, "ports": list(spec.service.ports)}
        return json.dumps(cfg)

    def _exposed(self) -> list[Path]:
        """Host paths bwrap binds (see :func:`bwrap.launch_preexec`)."""
        return [
            _python_paths()[1],
            *_numpy_dirs(),
            _SUPERVISOR_DIR,
            self.sock_dir,
            *[Path(p) for p in self.spec.layers],
            *self.runtime.site_dirs,
            *self.spec.binds,
        ]

    def _bwrap_argv(self, fds: bw.FdSet) -> list[str]:
        rt = self.runtime
        assert rt.bwrap_path is not None
        exe, prefix = _python_paths()
        argv = [rt.bwrap_path, *bw.base_args(), *bw.etc_args(fds, network=False, tls_roots=True)]
        if not str(prefix).startswith("/usr/"):
            argv += ["--ro-bind", str(prefix), str(prefix)]
        for d in _numpy_dirs():
            argv += ["--ro-bind", str(d), f"/opt/collimate/site/{d.name}"]
        shared = [f"{SHARED_SITE_DIR}/{i}" for i in range(len(rt.site_dirs))]
        for src, dest in zip(rt.site_dirs, shared, strict=True):
            argv += ["--ro-bind", str(src), dest]
        argv += ["--dir", "/opt/collimate/bin"]
        argv += ["--symlink", str(exe), "/opt/collimate/bin/python3"]
        argv += ["--symlink", str(exe), "/opt/collimate/bin/python"]
        argv += ["--tmpfs", "/.collimate", "--dir", "/.collimate/s", "--dir", "/.collimate/empty"]
        argv += ["--ro-bind", str(_SUPERVISOR_DIR), "/.collimate/sup"]
        argv += ["--bind", str(self.sock_dir), "/.collimate/socks"]
        lowers: list[str] = []
        for i, layer in enumerate(self.spec.layers):
            dest = f"/.collimate/l/{i}"
            argv += ["--ro-bind", str(layer), dest]
            lowers.insert(0, dest)
        if not lowers:
            lowers = ["/.collimate/empty"]
        for bind in self.spec.binds:  # a toolchain outside /usr, at its own path
            argv += ["--ro-bind", str(bind), str(bind)]
        argv += ["--dir", "/sandbox", "--remount-ro", "/dev", "--remount-ro", "/"]
        argv += ["--chdir", "/", "--clearenv"]
        argv += ["--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8"]
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            argv += ["--setenv", var, "1"]  # a preloaded numpy must not start threads
        base_env = {
            "PATH": _search_path("/opt/collimate/bin", self.spec.path),
            "HOME": "/sandbox",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "USER": "sandbox",
            "LOGNAME": "sandbox",
            "PYTHONPATH": ":".join(["/opt/collimate/site", *shared]),
            "PYTHONUSERBASE": "/sandbox/.local",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        cfg = self._config(
            layers=lowers,
            base_env=base_env,
            sys_path=["/opt/collimate/site", *shared],
            none_root=None,
        )
        argv += [
            str(exe),
            "-I",
            "-S",
            "-B",
            "/.collimate/sup/supervisor.py",
            "master",
            "/.collimate/socks",
            cfg,
        ]
        return argv

    def _none_argv(self) -> list[str]:
        exe, _ = _python_paths()
        bindir = self.dir / "bin"
        bindir.mkdir()
        for name in ("python3", "python"):
            (bindir / name).symlink_to(exe)
        none_root = self.dir / "sessions"
        none_root.mkdir()
        site = [str(d.parent) for d in _numpy_dirs()[:1]]
        base_env = {
            "PATH": _search_path(str(bindir), self.spec.path),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        if site:
            base_env["PYTHONPATH"] = site[0]
        layers = [str(Path(p).resolve()) for p in reversed(self.spec.layers)]
        cfg = self._config(
            layers=layers, base_env=base_env, sys_path=site, none_root=str(none_root)
        )
        return [str(exe), "-I", "-S", "-B", str(_SUPERVISOR), "master", str(self.sock_dir), cfg]

    @property
    def running(self) -> bool:
        """Whether the template's container is up."""
        return self.proc is not None and self.proc.poll() is None

    # -- master requests
    async def master(self, header: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError_(
                f"template {self.spec.template_id!r}: sandbox host is not running: "
                f"{self._stderr_tail()}"
            )
        try:
            reply, _ = await _call(self.master_sock, header, timeout=timeout)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
            raise RuntimeError_(
                f"template {self.spec.template_id!r}: master unreachable: {exc!r}"
            ) from exc
        return reply

    async def new_sessions(
        self,
        header: dict[str, Any],
        ids: Sequence[str],
        depth: int,
        *,
        template_id: str | None = None,
        networked: bool = False,
        light_parent: bool = False,
    ) -> list[LocalSession]:
        reply = await self.master(header)
        if not reply.get("ok"):
            if reply.get("lost"):
                raise SessionLost(str(reply.get("error")))
            if reply.get("busy"):
                raise SessionBusy(str(reply.get("error")))
            raise RuntimeError_(f"session bring-up failed: {reply.get('error')}")
        keys = [str(k) for k in reply["keys"]]
        light = bool(reply.get("light")) or (header.get("op") == "fork" and light_parent)
        out = []
        for sid, key in zip(ids, keys, strict=True):
            sess = LocalSession(
                self, sid, key, depth, template_id=template_id, networked=networked, light=light
            )
            self.sessions[key] = sess
            out.append(sess)
        if self.spec.service is not None:
            try:
                await asyncio.gather(*(sess.start_service(self.spec.service) for sess in out))
            except BaseException:
                await asyncio.gather(*(sess.close() for sess in out), return_exceptions=True)
                raise
        return out

    async def kill(self, keys: Sequence[str]) -> None:
        for key in keys:
            self.sessions.pop(key, None)
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(RuntimeError_):
            await self.master({"op": "kill", "keys": list(keys)})

    async def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None and self.runtime.isolation is Isolation.NONE:
            with contextlib.suppress(RuntimeError_):
                await self.master({"op": "killall"}, timeout=30)
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
            for _ in range(2000):
                if proc.poll() is not None:
                    break
                await asyncio.sleep(0.005)
        await self.workers.close()
        for sess in list(self.sessions.values()):
            sess._closed = True
            await sess.close_bridges()
        self.sessions.clear()
        self.proc = None
        if self.memcg is not None:
            await self.memcg.remove()
            self.memcg = None


# --------------------------------------------------------------------------
# sessions
# --------------------------------------------------------------------------


class LocalSession:
    """A session: a process tree forked by its template's master."""

    def __init__(
        self,
        host: TemplateHost,
        session_id: str,
        key: str,
        depth: int,
        *,
        template_id: str | None = None,
        networked: bool = False,
        light: bool = False,
    ) -> None:
        self._host = host
        #: a record in the master, run in boxes by workers (no server of its own)
        self._light = light
        self._session_id = session_id
        self._template_id = template_id or host.spec.template_id
        self._networked = networked
        self._key = key
        self._sock = host.sock_dir / f"{key}.sock"
        self._depth = depth
        self._closed = False
        self._running = 0
        self._forking = False
        self._bridges: dict[int, Bridge] = {}

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def endpoints(self) -> dict[str, str]:
        """The service's ports, ``{"<port>": "127.0.0.1:<node port>"}`` (empty without one)."""
        return {str(port): b.address for port, b in sorted(self._bridges.items())}

    # -- the service (see _sandbox/service.py and bridge.py)
    def _service_file(self, suffix: str) -> Path:
        return self._host.sock_dir / f"{self._key}.{suffix}"

    def service_log(self) -> str:
        """The tail of the service's output (stdout and stderr merged)."""
        return (read_bounded(self._service_file("svc.log")) or "").strip()

    def service_exit(self) -> int | None:
        """The service command's exit code, ``None`` while it runs."""
        text = read_bounded(self._service_file("svc.exit"), 64)
        try:
            return None if text is None else int(text)
        except ValueError:
            return None

    async def start_service(self, service: ServiceSpec) -> None:
        """Bridge each declared port; wait for ``service.http`` when set."""
        try:
            for port in service.ports:
                bridge = Bridge(self._service_file(f"p{port}.sock"))
                self._bridges[port] = bridge
                await bridge.start()
            if service.http:

                def failure() -> str | None:
                    code = self.service_exit()
                    if code is None or code == 0:  # 0: it may have backgrounded its server
                        return None
                    return f"service command exited with {code}"

                await wait_http(
                    self._service_file(f"p{service.ports[0]}.sock"),
                    service.http,
                    service.http_timeout_s,
                    failure,
                )
        except (ServiceFailed, OSError) as exc:
            log_tail = " | ".join(self.service_log()[-2000:].splitlines())
            raise ServiceNotReady(
                f"template {self.template_id!r}: service not ready: {exc}"
                + (f"; its output ends with: {log_tail}" if log_tail else "; it printed nothing")
            ) from exc

    def last_service_use(self) -> float | None:
        """``time.monotonic()`` of the last use of a service port (now while a
        connection is open); ``None`` without a service. Keeps the TTL reaper off."""
        if not self._bridges:
            return None
        if any(b.active for b in self._bridges.values()):
            return time.monotonic()
        return max(b.last_used for b in self._bridges.values())

    async def close_bridges(self) -> None:
        bridges = list(self._bridges.values())
        self._bridges.clear()
        await asyncio.gather(*(b.close() for b in bridges), return_exceptions=True)

    @property
    def template_id(self) -> str:
        return self._template_id

    @property
    def egress_socket(self) -> Path | None:
        """Where a networked session's egress relay connects: the node serves the
        session's egress gate there (``None`` for a session without network)."""
        return self._service_file("net.sock") if self._networked else None

    @property
    def fork_depth(self) -> int:
        return self._depth

    @property
    def socket_path(self) -> Path:
        return self._sock

    async def _ask(
        self, header: dict[str, Any], payload: bytes = b"", timeout: float | None = 60.0
    ) -> tuple[dict[str, Any], bytes]:
        if self._closed:
            raise SessionLost(f"session {self._session_id} is closed")
        try:
            return await _call(self._sock, header, payload, timeout=timeout)
        except (OSError, asyncio.IncompleteReadError, json.JSONDecodeError) as exc:
            raise SessionLost(f"session {self._session_id} is gone: {exc!r}") from exc

    @property
    def light(self) -> bool:
        """A record in its template's master, run in boxes (no server process)."""
        return self._light

    async def server_pid(self) -> int:
        """The session server's pid inside its own pid namespace (always 1 for bwrap)."""
        if self._light:
            raise RuntimeError_("a light session has no server")
        reply, _ = await self._ask({"op": "ping"})
        return int(reply["pid"])

    async def exec(self, spec: ExecSpec) -> ExecOutcome:
        if self._forking:
            raise SessionBusy("session is being forked")
        if self._light:
            reply, body = await self._exec_light(spec)
        else:
            header, payload = exec_header(spec)
            self._running += 1
            try:
                reply, body = await self._ask(header, payload, timeout=spec.timeout_seconds + 60.0)
            except asyncio.TimeoutError as exc:
                raise RuntimeError_(f"session {self._session_id}: exec reply overdue") from exc
            finally:
                self._running -= 1
        if not reply.get("ok"):
            raise RuntimeError_(f"exec failed: {reply.get('error')}")
        return ExecOutcome(
            exit_code=int(reply["exit_code"]),
            output=body,
            exec_time_ms=float(reply["exec_time_ms"]),
            timed_out=bool(reply.get("timed_out")),
            truncated=bool(reply.get("truncated")),
            seed_ack=str(reply.get("seed_ack", "no-ack")),
        )

    async def _exec_light(self, spec: ExecSpec) -> tuple[dict[str, Any], bytes]:
        """An exec of a light session, by a worker: a grade in-process, anything else in a box."""
        if self._closed:
            raise SessionLost(f"session {self._session_id} is closed")
        workers = self._host.workers
        timeout = spec.timeout_seconds + 60.0
        payload = grade_of(spec)
        self._running += 1
        try:
            reply: dict[str, Any] = {"fallback": True}
            body = b""
            if payload is not None:
                header: dict[str, Any] = {
                    "op": "grade",
                    "session": self._key,
                    "seed": spec.seed,
                    "timeout": float(spec.timeout_seconds),
                    "env": [list(kv) for kv in spec.env],
                }
                reply, body = await workers.request(*grade_request(header, payload), timeout)
            if reply.get("fallback"):  # not a grade a worker runs: an exec in a box
                header, data = exec_header(spec)
                reply, body = await workers.request(dict(header, session=self._key), data, timeout)
        except RuntimeError_ as exc:
            if self._closed or not self._host.running:  # closed, or its container died
                raise SessionLost(f"session {self._session_id} is gone: {exc}") from exc
            raise
        finally:
            self._running -= 1
        if self._closed or reply.get("lost"):  # deleted (or reaped) while it ran
            raise SessionLost(f"session {self._session_id} is gone")
        return reply, body

    async def fork(self, child_ids: Sequence[str]) -> list[SessionHandle]:
        if self._closed:
            raise SessionLost(f"session {self._session_id} is closed")
        if not child_ids:
            return []
        if self._host.spec.service is not None:
            # its running server writes to the upper layer a fork would freeze
            raise ValueError(
                "a session running a service cannot be forked; create more sessions instead"
            )
        if self._running or self._forking:
            raise SessionBusy("an exec is running in the session")
        if self._depth + 1 > MAX_FORK_DEPTH:
            raise RuntimeError_(
                f"fork depth limit reached ({MAX_FORK_DEPTH}): nested user namespaces are "
                "limited to 32 levels; fork from a shallower session"
            )
        self._forking = True
        try:
            lowers: list[str] = []
            if not self._light:  # a light session is frozen by the master itself
                reply, _ = await self._ask({"op": "freeze"})
                if not reply.get("ok"):
                    if reply.get("busy"):
                        raise SessionBusy(str(reply.get("error")))
                    raise RuntimeError_(f"fork failed: {reply.get('error')}")
                lowers = reply.get("lowers", [])
            children = await self._host.new_sessions(
                {"op": "fork", "parent": self._key, "lowers": lowers, "n": len(child_ids)},
                child_ids,
                self._depth + 1,
                template_id=self._template_id,
                networked=self._networked,
                light_parent=self._light,
            )
        finally:
            self._forking = False
        return list(children)

    async def close(self) -> None:
        await close_sessions([self])

    def _forget_files(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.unlink()
        for suffix in (
            "svc.log",
            "svc.exit",
            "net.sock",
            *(f"p{p}.sock" for p in self._service_ports()),
        ):
            with contextlib.suppress(OSError):
                self._service_file(suffix).unlink()

    def _service_ports(self) -> tuple[int, ...]:
        service = self._host.spec.service
        return service.ports if service is not None else ()


async def close_sessions(sessions: Sequence[LocalSession]) -> None:
    """Close sessions together: one kill request per template's master, not one per session."""
    by_host: dict[int, tuple[TemplateHost, list[LocalSession]]] = {}
    for sess in sessions:
        if not sess._closed:
            sess._closed = True
            by_host.setdefault(id(sess._host), (sess._host, []))[1].append(sess)
    for host, group in by_host.values():
        await asyncio.gather(*(sess.close_bridges() for sess in group))
        await host.kill([sess._key for sess in group])
        for sess in group:
            sess._forget_files()


# --------------------------------------------------------------------------
# runtime
# --------------------------------------------------------------------------


class LocalRuntime:
    """The node's runtime: ``bwrap`` (isolated) or ``none`` (no isolation)."""

    def __init__(
        self,
        isolation: Isolation,
        *,
        state_dir: Path | None = None,
        limits: Limits | None = None,
        sandbox_uid: int | None = None,
        bwrap_path: str | None = None,
        memory_limit_bytes: int | None = None,
        share_site_packages: bool = False,
        light_sessions: bool = True,
        languages: Sequence[str] | str | None = None,
    ) -> None:
        self.isolation = isolation
        #: sessions without a service or network are records run in boxes (docs/fast-path.md);
        #: False: every session gets its own server (the design before; tests of it use this)
        self.light_sessions = light_sessions
        #: the built-in language templates (c, cpp, java, ...), started on first use
        self.languages = LanguageTemplates(languages)
        #: host site-packages bound read-only into every sandbox (operator opt-in)
        self.site_dirs: list[Path] = _site_dirs() if share_site_packages else []
        #: per-template-container memory cap (cgroup v1, root only); default
        #: half the machine's RAM; 0 disables the safety net
        self.memory_limit_bytes = (
            _mem_total() // 2 if memory_limit_bytes is None else int(memory_limit_bytes)
        )
        self._memcg_parent: Path | None = None
        self._memcg_tag = secrets.token_hex(4)
        self.limits = limits or Limits()
        #: the host uid sandboxes run as (see sandbox_uid.py); create_runtime checked it
        self.sandbox_uid = resolve_sandbox_uid(None) if sandbox_uid is None else int(sandbox_uid)
        if os.geteuid() != 0:
            self.sandbox_uid = os.geteuid()
        self.bwrap_path = bwrap_path
        self._state_arg = state_dir
        self._own_state_dir = False
        self.state_dir = Path(state_dir) if state_dir is not None else Path("/nonexistent")
        self._hosts: dict[str, TemplateHost] = {}
        self._specs: dict[str, TemplateSpec] = {}
        #: networked twin id -> the built-in template whose container it shares
        self._twins: dict[str, str] = {}
        self._counter = 0
        self._started = False
        self._closed = False
        self._lock = asyncio.Lock()
        #: the unix socket the node serves on, recorded for crash recovery
        self.listen_socket: Path | None = None
        self._claim: _recovery.StateClaim | None = None

    # -- helpers
    def note_host(self, pid: int) -> None:
        """Record a process this run launched, for the recovery after a crash."""
        if self._claim is not None:
            self._claim.note_host(pid)

    def note_listen_socket(self, path: Path | None) -> None:
        """Record the node's unix socket (a crashed run's stale one is removed at start)."""
        self.listen_socket = path
        if self._claim is not None:
            self._claim.note_listen_socket(path)

    def make_memcg(self, name: str) -> _MemoryCgroup | None:
        if self._memcg_parent is None or self.memory_limit_bytes <= 0:
            return None
        try:
            return _MemoryCgroup(
                self._memcg_parent, f"collimate-{self._memcg_tag}-{name}", self.memory_limit_bytes
            )
        except OSError as exc:
            log.info("memory cgroup unavailable (%s); continuing without it", exc)
            return None

    def info(self) -> dict[str, Any]:
        """Facts for ``/v1/health`` and logs (isolation, bwrap, uid, cgroup)."""
        return {
            "isolation": self.isolation.value,
            "isolated": self.isolation is Isolation.BWRAP,
            "bwrap": self.bwrap_path,
            "sandbox_uid": self.sandbox_uid,
            "memory_cgroup": str(self._memcg_parent) if self._memcg_parent else None,
            "templates": self.templates(),
            "unavailable_templates": self.unavailable_templates(),
            "warning": None
            if self.isolation is Isolation.BWRAP
            else "isolation=none: sandboxed code runs without any isolation",
        }

    def chown(self, path: Path) -> None:
        if os.geteuid() == 0 and self.isolation is Isolation.BWRAP:
            os.chown(path, self.sandbox_uid, self.sandbox_uid)

    def _resolve(self, template_id: str) -> str:
        """The id of the template host that serves ``template_id``."""
        if template_id in self._hosts:
            return template_id
        twin_of = self._twins.get(template_id)
        if twin_of is not None and twin_of in self._hosts:
            return twin_of
        alias = TEMPLATE_ALIASES.get(template_id) or self.languages.resolve(template_id)
        if alias is not None and alias in self._hosts:
            return alias
        raise KeyError(template_id)

    async def _host_for(self, template_id: str) -> TemplateHost:
        """The template's host, starting a built-in language template on first use."""
        try:
            return self._hosts[self._resolve(template_id)]
        except KeyError:
            base = self._twins.get(template_id, template_id)  # "cpp-net" starts "cpp"
            started = await self.languages.start(base, self.limits, self.add_template)
            return self._hosts[started]

    # -- Runtime protocol
    async def start(self) -> None:
        if self._started:
            return
        if self.isolation is Isolation.NONE:
            msg = (
                "collimate node runtime: isolation='none' -- sandboxed code runs WITHOUT ANY "
                "ISOLATION as the node's own user (no namespaces, no seccomp, no filesystem "
                "or network restrictions). Use only on trusted code / development machines."
            )
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
            log.warning(msg)
        if self._state_arg is None:
            # default temp dirs of crashed nodes: nobody else would ever clean them
            _recovery.sweep_orphan_state_dirs(Path(tempfile.gettempdir()))
            self.state_dir = Path(tempfile.mkdtemp(prefix=_recovery.TEMP_PREFIX))
            self._own_state_dir = True
        else:
            self.state_dir = Path(self._state_arg)
            if not self.state_dir.exists():
                self._own_state_dir = True
        # Raises StateDirBusy (touching nothing) if a live node owns the dir;
        # else clears what a crashed previous owner left in it.
        self._claim, _ = _recovery.claim_state_dir(self.state_dir, owned=self._own_state_dir)
        self._claim.note_listen_socket(self.listen_socket)
        os.chmod(self.state_dir, 0o711)
        (self.state_dir / "t").mkdir(mode=0o711, exist_ok=True)
        (self.state_dir / "layers").mkdir(mode=0o711, exist_ok=True)
        self._memcg_parent = _memcg_parent()
        self._claim.note_memcg(self._memcg_parent, self._memcg_tag)
        if self._memcg_parent is None and self.memory_limit_bytes > 0:
            log.info("no writable cgroup-v1 memory controller: running without a memory cgroup")
        self._started = True
        try:
            await self.add_template(TemplateSpec(BUILTIN_TEMPLATE, preload=()))
            self.languages.detect()
        except BaseException:
            await self.close()
            raise
        self._add_network_twins()

    def _add_network_twins(self) -> None:
        """A networked twin for every template registered so far (the built-ins).

        A twin shares its template's container: the network is a property of
        each session (the master gives it the egress relay), so a twin costs
        nothing until used. Only the ``bwrap`` driver can confine a session's
        network; without it there are no twins.
        """
        if self.isolation is not Isolation.BWRAP:
            return
        for template_id, spec in self._specs.items():
            twin = template_id + NETWORK_TWIN_SUFFIX
            if not spec.network and twin not in self._hosts:
                self._twins[twin] = template_id
        for template_id in self.languages.detected.available:  # started on first use
            self._twins.setdefault(template_id + NETWORK_TWIN_SUFFIX, template_id)

    def templates(self) -> list[str]:
        ids = list(self._hosts)
        ids += [a for a, t in TEMPLATE_ALIASES.items() if t in self._hosts and a not in ids]
        ids += [t for t in self.languages.ids() if t not in ids]
        offered = set(self._hosts) | set(self.languages.detected.available)
        ids += [t for t, base in self._twins.items() if base in offered and t not in ids]
        return ids

    def unavailable_templates(self) -> dict[str, str]:
        """Built-in templates this node does not offer, and why (a missing binary)."""
        return self.languages.unavailable()

    def template_spec(self, template_id: str) -> TemplateSpec:
        try:
            spec = self._specs[self._resolve(template_id)]
        except KeyError:  # a language template not started yet: its spec is built then
            offered = self.languages.resolve(self._twins.get(template_id, template_id))
            if offered is None:
                raise
            spec = TemplateSpec(offered)
        if template_id in self._twins and template_id not in self._hosts:
            return dataclasses.replace(spec, template_id=template_id, network=True)
        return spec

    async def add_template(self, spec: TemplateSpec) -> None:
        if not self._started or self._closed:
            raise RuntimeError_("runtime is not running")
        if not _ID_RE.match(spec.template_id):
            raise ValueError(f"bad template id {spec.template_id!r}")
        if spec.service is not None and self.isolation is not Isolation.BWRAP:
            raise ValueError(
                "services need the bwrap driver (each session's own network namespace); "
                "this node runs isolation='none'"
            )
        async with self._lock:
            old = self._hosts.pop(spec.template_id, None)
            self._counter += 1
            host = TemplateHost(self, spec, self._counter)
            await host.start()
            self._hosts[spec.template_id] = host
            self._specs[spec.template_id] = spec
        if old is not None:
            await self._stop_host(old)

    async def _stop_host(self, host: TemplateHost) -> None:
        await host.stop()
        shutil.rmtree(host.dir, ignore_errors=True)

    async def close_sessions(self, handles: Sequence[SessionHandle]) -> None:
        """Close many sessions with one kill request per template (see :func:`close_sessions`)."""
        ours = [h for h in handles if isinstance(h, LocalSession)]
        others = [h for h in handles if not isinstance(h, LocalSession)]
        await asyncio.gather(close_sessions(ours), *(h.close() for h in others))

    async def create_session(self, template_id: str, session_id: str) -> SessionHandle:
        if self._closed:
            raise RuntimeError_("runtime is closed")
        await self._host_for(template_id)  # a language template starts on first use
        spec = self.template_spec(template_id)
        host = self._hosts[self._resolve(template_id)]
        networked = spec.network and self.isolation is Isolation.BWRAP
        (sess,) = await host.new_sessions(
            {"op": "create", "network": networked, "light": host.light and not networked},
            [session_id],
            0,
            template_id=spec.template_id,
            networked=networked,
        )
        return sess

    async def bake(
        self,
        template_id: str,
        base: str,
        setup_commands: Sequence[str],
        *,
        network: bool = True,
        service: ServiceSpec | None = None,
        env: Sequence[tuple[str, str]] = (),
    ) -> TemplateSpec:
        if not _ID_RE.match(template_id):
            raise ValueError(f"bad template id {template_id!r}")
        await self._host_for(base)
        base_spec = self.template_spec(base)
        merged_env = tuple({**dict(base_spec.env), **dict(env)}.items())
        # a bake with network (or over a networked base) makes a networked template
        networked = network or base_spec.network
        if not setup_commands:  # a new service or environment over the base's files
            spec = dataclasses.replace(
                base_spec,
                template_id=template_id,
                env=merged_env,
                service=service or base_spec.service,
                network=networked,
            )
            await self.add_template(spec)
            return spec
        layer_root = self.state_dir / "layers" / f"{template_id}-{secrets.token_hex(4)}"
        layer_root.mkdir(mode=0o711)
        upper, work = layer_root / "upper", layer_root / "work"
        upper.mkdir()
        work.mkdir()
        for p in (layer_root, upper, work):
            self.chown(p)
        ok = False
        try:
            if self.isolation is Isolation.BWRAP:
                rc, out = await self._bake_bwrap(base_spec, layer_root, setup_commands, network)
            else:
                rc, out = await self._bake_none(base_spec, upper, setup_commands)
            if rc != 0:
                raise RuntimeError_(
                    f"bake of {template_id!r} failed (exit {rc}): "
                    f"{out.decode(errors='replace')[-4000:]}"
                )
            shutil.rmtree(work, ignore_errors=True)
            spec = dataclasses.replace(  # keeps the base's toolchain binds and limits
                base_spec,
                template_id=template_id,
                layers=(*base_spec.layers, upper),
                env=merged_env,
                service=service or base_spec.service,
                network=networked,
            )
            await self.add_template(spec)
            ok = True
            return spec
        finally:
            if not ok:
                shutil.rmtree(layer_root, ignore_errors=True)

    async def _bake_bwrap(
        self,
        base: TemplateSpec,
        layer_root: Path,
        setup_commands: Sequence[str],
        network: bool,
    ) -> tuple[int, bytes]:
        assert self.bwrap_path is not None
        exe, prefix = _python_paths()
        fds = bw.FdSet()
        try:
            argv = [self.bwrap_path, *bw.base_args(), *bw.etc_args(fds, network=network)]
            if network:
                argv += ["--share-net"]
            if not str(prefix).startswith("/usr/"):
                argv += ["--ro-bind", str(prefix), str(prefix)]
            for d in _numpy_dirs():
                argv += ["--ro-bind", str(d), f"/opt/collimate/site/{d.name}"]
            argv += ["--dir", "/opt/collimate/bin"]
            argv += ["--symlink", str(exe), "/opt/collimate/bin/python3"]
            argv += ["--symlink", str(exe), "/opt/collimate/bin/python"]
            argv += ["--tmpfs", "/.collimate", "--dir", "/.collimate/empty"]
            argv += ["--ro-bind", str(_SUPERVISOR_DIR), "/.collimate/sup"]
            argv += ["--bind", str(layer_root), "/.collimate/out"]
            lowers: list[str] = []
            for i, layer in enumerate(base.layers):
                dest = f"/.collimate/l/{i}"
                argv += ["--ro-bind", str(layer), dest]
                lowers.insert(0, dest)
            for bind in base.binds:  # the base's toolchain (a bake over a language template)
                argv += ["--ro-bind", str(bind), str(bind)]
            cfg = {
                "lowers": lowers or ["/.collimate/empty"],
                "commands": list(setup_commands),
                "network": network,
                "env": {
                    "PATH": _search_path("/opt/collimate/bin", base.path),
                    "HOME": "/sandbox",
                    "TMPDIR": "/tmp",
                    "LANG": "C.UTF-8",
                    "PYTHONPATH": "/opt/collimate/site",
                    "PYTHONUSERBASE": "/sandbox/.local",
                    "PIP_NO_CACHE_DIR": "1",
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                    **dict(base.env),
                },
            }
            argv += ["--dir", "/sandbox", "--chdir", "/", "--clearenv"]
            argv += [
                str(exe),
                "-I",
                "-S",
                "-B",
                "/.collimate/sup/supervisor.py",
                "bake",
                json.dumps(cfg),
            ]
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=fds.fds,
                start_new_session=True,
                preexec_fn=bw.launch_preexec(
                    self.sandbox_uid,
                    [
                        prefix,
                        *_numpy_dirs(),
                        _SUPERVISOR_DIR,
                        layer_root,
                        *base.layers,
                        *base.binds,
                    ],
                    bwrap=self.bwrap_path,
                ),
            )
            self.note_host(proc.pid)
        finally:
            fds.close()
        out, _ = await proc.communicate()
        return int(proc.returncode or 0), out

    async def _bake_none(
        self, base: TemplateSpec, upper: Path, setup_commands: Sequence[str]
    ) -> tuple[int, bytes]:
        for layer in base.layers:
            shutil.copytree(layer, upper, symlinks=True, dirs_exist_ok=True)
        out = bytearray()
        env = dict(os.environ, HOME=str(upper), PYTHONUSERBASE=str(upper / ".local"))
        for cmd in setup_commands:
            proc = await asyncio.create_subprocess_shell(
                cmd, cwd=upper, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            data, _ = await proc.communicate()
            out += data
            if proc.returncode:
                return int(proc.returncode), bytes(out)
        # the layer holds the whole result; do not stack the base layers twice
        return 0, bytes(out)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.languages.close()
        hosts = list(self._hosts.values())
        self._hosts.clear()
        for host in hosts:
            await self._stop_host(host)
        if self._started:
            if self._own_state_dir:
                shutil.rmtree(self.state_dir, ignore_errors=True)
            else:
                for sub in ("t", "layers"):
                    shutil.rmtree(self.state_dir / sub, ignore_errors=True)
        if self._claim is not None:
            self._claim.release()  # last: the lock guards the dir until it is clean
