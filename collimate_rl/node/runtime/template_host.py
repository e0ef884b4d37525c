"""A template's host: the warm container (``bwrap``) or plain process (``none``)
running the supervisor's master; its launch (argv, config, env), its master
requests, and the sessions it forks.

The host knows the runtime only through :class:`HostRuntime`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from . import _recovery
from . import bwrap as bw
from ._warm import HARNESS_MIN_PYTHON, harness_source, warm_modules
from .base import (
    ImageRoot,
    Isolation,
    Limits,
    RuntimeError_,
    SessionBusy,
    SessionLost,
    TemplateSpec,
)
from .host_paths import (
    SHARED_SITE_DIR,
    SUPERVISOR,
    SUPERVISOR_DIR,
    as_sessions_see,
    layer_args,
    numpy_dirs,
    python_args,
    python_paths,
    python_sources,
    search_path,
    supervisor_argv,
)
from .image_template import ImageFacts, image_env, image_facts, skeleton, user_paths_shim
from .local_session import LocalSession
from .memcg import MemoryCgroup
from .unix_rpc import unix_call
from .workers import WorkerPool

__all__ = ["DEFAULT_PRELOAD", "HostRuntime", "TemplateHost"]

#: What every template's fork-server preloads (plus ``TemplateSpec.preload``).
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
#: Where a container finds the folder of the zygote's native loop (``native.py``).
ZYGOTE_LOOP_DIR = "/.collimate/zygote-loop"
#: sun_path holds 108 bytes, the last one a NUL
_UNIX_PATH_MAX = 107
#: room for "master.sock" and session keys ("<base36>.sock")
_SOCKET_NAME_MAX = 16


class HostRuntime(Protocol):
    """What a template host needs of its runtime (``local_runtime.LocalRuntime``)."""

    state_dir: Path
    isolation: Isolation
    bwrap_path: str | None
    sandbox_uid: int
    site_dirs: list[Path]
    light_sessions: bool
    zygote_loop: Path | None
    syscall_policy: str
    limits: Limits

    def chown(self, path: Path) -> None: ...

    def make_memcg(self, name: str) -> MemoryCgroup | None: ...

    def note_host(self, pid: int) -> None: ...


def _in_container(library: Path | None) -> str | None:
    """Where the container sees the zygote's native loop (``None``: not built)."""
    return f"{ZYGOTE_LOOP_DIR}/{library.name}" if library is not None else None


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


class TemplateHost:
    """One warm container (or, for ``none``, one plain process) per template."""

    def __init__(self, runtime: HostRuntime, spec: TemplateSpec, index: int) -> None:
        self.runtime = runtime
        self.spec = spec
        self.dir = runtime.state_dir / "t" / str(index)
        self.sock_dir = self.dir / "socks"
        self.master_sock = self.sock_dir / "master.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.sessions: dict[str, LocalSession] = {}
        self.memcg: MemoryCgroup | None = None
        #: the workers that run light sessions' execs and grades (``workers.py``)
        self.workers = WorkerPool(self.master, self.sock_dir)
        #: an image template's user, home and python3 (read from its layers at start)
        self.image_facts: ImageFacts | None = None

    @property
    def light(self) -> bool:
        """Whether this template's sessions (without network) are light (see docs/fast-path.md).

        An image template's are unless it has a service (even with ``light_sessions=False``).
        """
        rt = self.runtime
        if self.spec.image is not None:
            return self.spec.service is None
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
        config = -1
        try:
            preexec: Callable[[], None] | None = None
            if isolated:
                argv, config_text = self._bwrap_argv(fds)
                image = self.spec.image
                facts = self.image_facts
                launch = bw.launch_preexec(
                    rt.sandbox_uid,
                    self._exposed(),
                    bwrap=rt.bwrap_path,
                    idmapped=image.layers if image is not None else (),
                    idmap=(facts.uid, facts.gid) if facts is not None else (0, 0),
                )
                preexec = launch
            else:
                argv, config_text = self._none_argv()
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

            # the config arrives on stdin (see the supervisor's ``master.main``)
            config = bw.memfd_holding(config_text, "collimate-config")
            with open(self.dir / "stderr.log", "wb") as err:
                return subprocess.Popen(
                    argv,
                    stdin=config,
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
            if config >= 0:
                os.close(config)

    async def start(self) -> None:
        if len(os.fsencode(self.sock_dir)) + len("/") + _SOCKET_NAME_MAX > _UNIX_PATH_MAX:
            # connect() would fail with a bare "did not come up" 30 s later
            raise RuntimeError_(
                f"state dir {self.runtime.state_dir} is too long for the session sockets "
                f"inside it (unix socket paths are limited to {_UNIX_PATH_MAX} bytes); "
                "pass a shorter --state-dir"
            )
        if self.spec.image is not None:
            self._prepare_image()
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
                    reply, _ = await unix_call(self.master_sock, {"op": "ping"}, timeout=10)
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

    def _prepare_image(self) -> None:
        """Read the image's facts from its layers; make its skeleton layer (image_template)."""
        image = self.spec.image
        assert image is not None
        if self.runtime.isolation is not Isolation.BWRAP:
            raise ValueError(
                "image templates need the bwrap driver (the image's root is each session's "
                "own mount namespace); this node runs isolation='none'"
            )
        self.image_facts = facts = image_facts(image)
        self.dir.mkdir(parents=True, exist_ok=True)
        made = [skeleton(self.dir / "skeleton", image.working_dir)]
        if facts.uid != 0 and os.geteuid() == 0:  # (the layers' owners are the node's if not)
            shim = user_paths_shim(self.dir / "shim", image.layers, facts.uid)
            if shim is not None:
                made.append(shim)
        for folder in made:
            self.runtime.chown(folder)
            for sub in folder.rglob("*"):
                self.runtime.chown(sub)

    def _node_layers(self) -> list[Path]:
        """The layers the node made for an image template (skeleton, shim), not the image's."""
        return [p for p in (self.dir / "skeleton", self.dir / "shim") if p.is_dir()]

    def _image_layers(self) -> tuple[Path, ...]:
        """An image template's lower layers, lowest first: the skeleton, the image's, the shim,
        then the layers a bake's setup left (``ImageRoot.baked``)."""
        image = self.spec.image
        assert image is not None
        shim = self.dir / "shim"
        return (
            self.dir / "skeleton",
            *image.layers,
            *([shim] if shim.is_dir() else []),
            *image.baked,
        )

    def _image_env(self) -> dict[str, str]:
        """An image template's sessions' environment: the image's ``Env`` with ``PATH``
        (Docker's default when it has none) and the user's ``HOME``."""
        image, facts = self.spec.image, self.image_facts
        assert image is not None and facts is not None
        return image_env(image, facts)

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
        env: Sequence[tuple[str, str]],
        sys_path: list[str],
        none_root: str | None,
    ) -> str:
        """The master's config; ``env``: the template's own, as its sessions see it."""
        spec = self.spec
        image, facts = spec.image, self.image_facts
        cfg: dict[str, Any] = {
            "isolated": self.runtime.isolation is Isolation.BWRAP,
            "template_id": spec.template_id,
            "interpreter": spec.interpreter,
            "preload": list(DEFAULT_PRELOAD)
            + [m for m in spec.preload if m not in DEFAULT_PRELOAD],
            "env": [list(kv) for kv in env],
            "limits": _limits_dict(self.spec.limits or self.runtime.limits),
            "layers": layers,
            "base_env": base_env,
            "sys_path": sys_path,
            "none_root": none_root,
            "warm_modules": warm_modules(spec.interpreter),
            "light": self.light,  # sessions as records, run in boxes (docs/fast-path.md)
            "zygote_loop": _in_container(self.runtime.zygote_loop),
            "syscall_policy": self.runtime.syscall_policy,
        }
        if spec.service is not None:
            cfg["service"] = {"cmd": spec.service.cmd, "ports": list(spec.service.ports)}
            if spec.service.argv:
                cfg["service"]["argv"] = list(spec.service.argv)
        if image is not None and facts is not None:
            workdir = "/" + image.working_dir.lstrip("/")
            cfg["image"] = {"uid": facts.uid, "gid": facts.gid, "workdir": workdir}
            # what a session may write, as its processes name it (inside the image root,
            # after the box's chroot): the whole copy-on-write root, its /dev and /proc
            # among it (read by the Landlock fence of the syscall-policy work, when merged)
            cfg["writable_paths"] = ["/"]
            warm = _warm_image_settings(image, facts)
            if warm is not None and self.light:
                cfg["warm_image"] = warm
        return json.dumps(cfg)

    def _exposed(self) -> list[Path]:
        """Host paths bwrap binds (see :func:`bwrap.launch_preexec`)."""
        return [
            *python_sources(),
            SUPERVISOR_DIR,
            *([self.runtime.zygote_loop.parent] if self.runtime.zygote_loop is not None else []),
            self.sock_dir,
            *[Path(p) for p in self.spec.layers],
            *(self._node_layers() if self.spec.image is not None else ()),
            *(self.spec.image.baked if self.spec.image is not None else ()),
            *self.runtime.site_dirs,
            *self.spec.binds,
        ]

    def _bwrap_argv(self, fds: bw.FdSet) -> tuple[list[str], str]:
        """The bwrap command line, and the master's config (it reads it on stdin)."""
        rt = self.runtime
        assert rt.bwrap_path is not None
        exe, _ = python_paths()
        argv = [rt.bwrap_path, *bw.base_args(), *bw.etc_args(fds, network=False, tls_roots=True)]
        argv += python_args()
        shared = [f"{SHARED_SITE_DIR}/{i}" for i in range(len(rt.site_dirs))]
        for src, dest in zip(rt.site_dirs, shared, strict=True):
            argv += ["--ro-bind", str(src), dest]
        argv += ["--tmpfs", "/.collimate", "--dir", "/.collimate/s", "--dir", "/.collimate/empty"]
        argv += ["--ro-bind", str(SUPERVISOR_DIR), "/.collimate/sup"]
        if rt.zygote_loop is not None:  # (a folder: the launch re-exposes folders, not files)
            argv += ["--ro-bind", str(rt.zygote_loop.parent), ZYGOTE_LOOP_DIR]
        argv += ["--bind", str(self.sock_dir), "/.collimate/socks"]
        image = self.spec.image
        if image is None:
            layers, lowers = layer_args(self.spec.layers, self.spec.binds)
        else:  # the skeleton lowest, then the image's layers (idmapped by the launcher), the
            # shim and the baked ones (the sandbox uid's already)
            layers, lowers = layer_args(self._image_layers(), ())
        argv += layers
        argv += ["--dir", "/sandbox", "--remount-ro", "/dev", "--remount-ro", "/"]
        argv += ["--chdir", "/", "--clearenv"]
        argv += ["--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8"]
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            argv += ["--setenv", var, "1"]  # a preloaded numpy must not start threads
        seen = as_sessions_see(self.spec)
        base_env = {
            "PATH": search_path("/opt/collimate/bin", seen.path),
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
        if image is not None:
            base_env = self._image_env()
        cfg = self._config(
            layers=lowers,
            base_env=base_env,
            env=seen.env,
            sys_path=["/opt/collimate/site", *shared],
            none_root=None,
        )
        argv += supervisor_argv(str(exe), "master", "/.collimate/socks", "-")
        return argv, cfg

    def _none_argv(self) -> tuple[list[str], str]:
        """The unisolated master's command line, and its config (read on stdin)."""
        exe, _ = python_paths()
        bindir = self.dir / "bin"
        bindir.mkdir()
        for name in ("python3", "python"):
            (bindir / name).symlink_to(exe)
        none_root = self.dir / "sessions"
        none_root.mkdir()
        site = [str(d.parent) for d in numpy_dirs()[:1]]
        base_env = {
            "PATH": search_path(str(bindir), self.spec.path),
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
            layers=layers,
            base_env=base_env,
            env=self.spec.env,
            sys_path=site,
            none_root=str(none_root),
        )
        argv = [str(exe), "-I", "-S", "-B", str(SUPERVISOR), "master", str(self.sock_dir), "-"]
        return argv, cfg

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
            reply, _ = await unix_call(self.master_sock, header, timeout=timeout)
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


def _warm_image_settings(image: ImageRoot, facts: ImageFacts) -> dict[str, str] | None:
    """What an image template's warm fork-server needs (``_sandbox/image_zygote.py``):
    the image's ``python3``, its ``PATH`` and the harness source; ``None`` when the image
    has no ``python3`` the harness runs in (grades then fail with ``ImageWithoutPython``)."""
    version = facts.python_version
    if facts.python3 is None or (version is not None and version < HARNESS_MIN_PYTHON):
        return None
    path = image_env(image, facts)["PATH"]
    return {"python3": facts.python3, "path": path, "harness": harness_source()}
