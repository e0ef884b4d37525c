"""The node's runtime on the host: templates (built-in, baked, networked twins),
creating and closing sessions, and start/close of the whole.

One template host (a bwrap container running the supervisor's master) per
template (:mod:`.template_host`); sessions are processes forked by that master
(:mod:`.local_session`). The host talks to the master and to every session
server over unix sockets in the state dir (:mod:`.unix_rpc`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import _recovery, idmap
from . import bwrap as bw
from ._sandbox.landlock import landlock_abi
from .base import (
    ImageRoot,
    ImageWithoutShell,
    Isolation,
    Limits,
    RuntimeError_,
    ServiceSpec,
    SessionHandle,
    TemplateSpec,
)
from .host_paths import (
    SUPERVISOR_DIR,
    as_sessions_see,
    layer_args,
    python_args,
    python_paths,
    python_sources,
    search_path,
    site_dirs,
    supervisor_argv,
)
from .image_template import ImageFacts, has_shell, image_env, image_facts, skeleton, user_paths_shim
from .languages import LanguageTemplates
from .local_session import LocalSession, close_sessions
from .memcg import MemoryCgroup, mem_total, memcg_parent
from .native import zygote_loop_library
from .sandbox_uid import BAKE_ID_COUNT, resolve_bake_range, resolve_sandbox_uid
from .surface import allowed_call_count, log_missing_layers
from .template_host import TemplateHost

log = logging.getLogger("collimate_rl.node.runtime")

__all__ = ["BUILTIN_TEMPLATE", "NETWORK_TWIN_SUFFIX", "TEMPLATE_ALIASES", "LocalRuntime"]

#: The built-in template id: the node's warm Python with numpy importable.
BUILTIN_TEMPLATE = "python3"
#: Alias ids that resolve to the built-in template (the SDK's local backend uses ``py``).
TEMPLATE_ALIASES = {"py": BUILTIN_TEMPLATE}
#: Every built-in template ``<id>`` has a networked twin ``<id><suffix>`` (``python3-net``):
#: the same container, sessions with the egress relay (see docs/egress.md).
NETWORK_TWIN_SUFFIX = "-net"
#: The candidate seccomp policies a runtime can run (see ``syscall_policy`` below).
SYSCALL_POLICIES = ("allowlist", "record")
_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


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
        native_zygote: bool = True,
        languages: Sequence[str] | str | None = None,
        syscall_policy: str = "allowlist",
    ) -> None:
        self.isolation = isolation
        if syscall_policy not in SYSCALL_POLICIES:
            raise ValueError(
                f"syscall_policy must be one of {SYSCALL_POLICIES}: {syscall_policy!r}"
            )
        #: "allowlist" (every call outside the list: ENOSYS); "record", the recorder's only:
        #: every call but the dangerous ones allowed (``syscall_recorder.py``)
        self.syscall_policy = syscall_policy
        #: sessions without a service or network are records run in boxes (docs/fast-path.md);
        #: False: every session gets its own server (the design before; tests of it use this)
        self.light_sessions = light_sessions
        self._native_zygote = native_zygote
        #: the zygotes' native clone loop (``native.py``), once built; None: they loop in Python
        self.zygote_loop: Path | None = None
        #: the built-in language templates (c, cpp, java, ...), started on first use
        self.languages = LanguageTemplates(languages)
        #: host site-packages bound read-only into every sandbox (operator opt-in)
        self.site_dirs: list[Path] = site_dirs() if share_site_packages else []
        #: per-template-container memory cap (cgroup v1, root only); default
        #: half the machine's RAM; 0 disables the safety net
        self.memory_limit_bytes = (
            mem_total() // 2 if memory_limit_bytes is None else int(memory_limit_bytes)
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
        self._bake_range: int | None = None  # (_bake_ids)
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

    def make_memcg(self, name: str) -> MemoryCgroup | None:
        if self._memcg_parent is None or self.memory_limit_bytes <= 0:
            return None
        try:
            return MemoryCgroup(
                self._memcg_parent, f"collimate-{self._memcg_tag}-{name}", self.memory_limit_bytes
            )
        except OSError as exc:
            log.info("memory cgroup unavailable (%s); continuing without it", exc)
            return None

    def info(self) -> dict[str, Any]:
        """Facts for ``/v1/health`` and logs (isolation, bwrap, uid, cgroup, syscall policy)."""
        isolated = self.isolation is Isolation.BWRAP
        return {
            "isolation": self.isolation.value,
            "isolated": self.isolation is Isolation.BWRAP,
            "bwrap": self.bwrap_path,
            "sandbox_uid": self.sandbox_uid,
            "memory_cgroup": str(self._memcg_parent) if self._memcg_parent else None,
            "zygote_loop": self._zygote_loop_kind(),
            # the candidates' seccomp policy and its size, the Landlock ABI (collimate doctor)
            "syscall_policy": self.syscall_policy if isolated else None,
            "allowed_syscalls": allowed_call_count() if isolated else None,
            "landlock_abi": landlock_abi() if isolated else 0,
            "templates": self.templates(),
            "unavailable_templates": self.unavailable_templates(),
            "warning": None
            if self.isolation is Isolation.BWRAP
            else "isolation=none: sandboxed code runs without any isolation",
        }

    def _zygote_loop_kind(self) -> str | None:
        """Which clone loop the zygotes run (``native.py``); ``None`` without isolation."""
        if self.isolation is not Isolation.BWRAP:
            return None
        return "native" if self.zygote_loop is not None else "python"

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
        else:
            log_missing_layers()  # Landlock is defense in depth: a kernel without it goes on
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
        self._memcg_parent = memcg_parent()
        self._claim.note_memcg(self._memcg_parent, self._memcg_tag)
        if self._memcg_parent is None and self.memory_limit_bytes > 0:
            log.info("no writable cgroup-v1 memory controller: running without a memory cgroup")
        if self._native_zygote and self.isolation is Isolation.BWRAP:
            self.zygote_loop = await asyncio.to_thread(zygote_loop_library)
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
        if setup_commands and base_spec.image is not None:  # over an image template's root
            spec = dataclasses.replace(
                base_spec,
                template_id=template_id,
                env=merged_env,
                service=service or base_spec.service,
                network=networked,
            )
            return await self.bake_image(spec, setup_commands, network=network)
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

    async def bake_image(
        self, spec: TemplateSpec, setup_commands: Sequence[str], *, network: bool = False
    ) -> TemplateSpec:
        """Run setup commands over an image template's root and register ``spec`` with
        their result as one more read-only layer on top of the image's (``ImageRoot.baked``).

        The commands are trusted (the operator's) and run once, in order, in a one-shot
        container: the image's root (its layers read-only, idmapped as a session's are, a
        fresh upper layer on top) as ``/``, the image's ``User`` (mapped onto the sandbox
        uid), ``Env`` and ``WorkingDir``, the image's ``/bin/sh -c``, a scratch ``/tmp``, no
        capabilities, the seccomp allowlist, and network only with ``network``
        (``_sandbox/bake.py``). A root node maps the image's ids 0..65535 onto a reserved
        host range instead (:meth:`_bake_ids`), so the image's files show with their real
        owners and the setup's root keeps Docker's default capabilities in that namespace
        (``chown``, ``dpkg``, ``apt-get``); the node then makes every entry of the layer the
        sandbox uid's on disk (:meth:`_own_baked_layer`). The upper layer they leave
        (overlayfs whiteouts for what they deleted) becomes the template's top layer; its
        files are the sandbox uid's, so its sessions see them as the image's user's, as the
        image's own. The layer lives in the
        state dir until the runtime closes; a failed bake leaves nothing.

        Returns:
            the template registered (``spec`` with the layer in ``spec.image.baked``).

        Raises:
            ValueError: a bad id, no bwrap, the image's ``User`` is not in it
                (``ImageUserError``), or it has no ``/bin/sh`` (``ImageWithoutShell``).
            RuntimeError_: a command failed (its exit status and the output's tail), or the
                container did not start.
        """
        image = spec.image
        if image is None:
            raise ValueError(f"template {spec.template_id!r} is not an image template")
        if not _ID_RE.match(spec.template_id):
            raise ValueError(f"bad template id {spec.template_id!r}")
        if not setup_commands:
            await self.add_template(spec)
            return spec
        if self.isolation is not Isolation.BWRAP:
            raise ValueError(
                "image templates need the bwrap driver (the image's root is each session's "
                "own mount namespace); this node runs isolation='none'"
            )
        if not self._started or self._closed:
            raise RuntimeError_("runtime is not running")
        facts = image_facts(image)
        if not has_shell(image.stack):
            raise ImageWithoutShell(
                "the image has no /bin/sh to run setup commands with (they run as the image's "
                "`/bin/sh -c`): build them into the image, or start from one with a shell"
            )
        layer_root = self.state_dir / "layers" / f"{spec.template_id}-{secrets.token_hex(4)}"
        layer_root.mkdir(mode=0o711)
        ok = False
        try:
            ids = await asyncio.to_thread(self._bake_ids, facts)
            lowers = await asyncio.to_thread(self._image_bake_dirs, layer_root, image, facts, ids)
            rc, out = await self._bake_image_bwrap(
                image, facts, layer_root, lowers, setup_commands, network, ids
            )
            if rc != 0:
                raise RuntimeError_(
                    f"bake of {spec.template_id!r} failed (exit {rc}): "
                    f"{out.decode(errors='replace')[-4000:]}"
                    + (_ONE_UID_NOTE if ids is None else "")
                )
            if ids is not None:
                await asyncio.to_thread(self._own_baked_layer, layer_root / "upper")
            for name in ("work", "skeleton", "shim"):
                shutil.rmtree(layer_root / name, ignore_errors=True)
            baked = dataclasses.replace(
                spec, image=dataclasses.replace(image, baked=(*image.baked, layer_root / "upper"))
            )
            await self.add_template(baked)
            ok = True
            return baked
        finally:
            if not ok:
                shutil.rmtree(layer_root, ignore_errors=True)

    def _bake_ids(self, facts: ImageFacts) -> int | None:
        """The first host id of the range an image bake maps (uids and gids 0..65535 of the
        bake onto it: ``sandbox_uid.resolve_bake_range``), picked once; ``None``: the bake
        maps the image's ``User`` only (a node that is not root cannot map more, and a
        ``User`` beyond the range keeps that path too)."""
        if os.geteuid() != 0 or max(facts.uid, facts.gid) >= BAKE_ID_COUNT:
            return None
        if self._bake_range is None:
            self._bake_range = resolve_bake_range(self.sandbox_uid)
        return self._bake_range

    def _own_baked_layer(self, upper: Path) -> None:
        """A ranged bake's upper layer as sessions expect one: every entry (whiteouts and
        links too) the sandbox uid's on disk, its mode kept but for the setuid and setgid
        bits (cleared, as the unpacker clears them in an image's layers)."""
        uid = self.sandbox_uid

        def own(path: str) -> None:
            os.lchown(path, uid, uid)
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o6000:
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o6000)

        own(str(upper))
        for root, dirs, files in os.walk(upper):
            for name in (*dirs, *files):
                own(os.path.join(root, name))

    def _image_bake_dirs(
        self, layer_root: Path, image: ImageRoot, facts: ImageFacts, ids: int | None = None
    ) -> tuple[Path, ...]:
        """An image bake's folders in ``layer_root`` (the upper and work dirs, the skeleton
        and shim a session's container has too: ``TemplateHost._prepare_image``), the sandbox
        uid's; the lower layers, lowest first. A ranged bake (``ids``: its range's first
        host id) has its upper and work dirs its root's and the skeleton its user's, and no
        shim (the image's real owners show)."""
        made = [layer_root / "upper", layer_root / "work"]
        for folder in made:
            folder.mkdir()
        node_layers = [skeleton(layer_root / "skeleton", image.working_dir)]
        if ids is not None:
            self.chown(layer_root)
            for folder in made:
                os.chown(folder, ids, ids)
            for sub in (node_layers[0], *node_layers[0].rglob("*")):
                os.chown(sub, ids + facts.uid, ids + facts.gid)
            return (node_layers[0], *image.layers, *image.baked)
        shim = None
        if facts.uid != 0 and os.geteuid() == 0:  # (the layers' owners are the node's if not)
            shim = user_paths_shim(layer_root / "shim", image.layers, facts.uid)
        if shim is not None:
            node_layers.append(shim)
        self.chown(layer_root)
        for folder in (*made, *node_layers):
            self.chown(folder)
            for sub in folder.rglob("*"):
                self.chown(sub)
        return (node_layers[0], *image.layers, *([shim] if shim else []), *image.baked)

    async def _bake_image_bwrap(
        self,
        image: ImageRoot,
        facts: ImageFacts,
        layer_root: Path,
        lowers: tuple[Path, ...],
        setup_commands: Sequence[str],
        network: bool,
        ids: int | None = None,
    ) -> tuple[int, bytes]:
        """Run an image bake's container (see :meth:`bake_image`); its status and the tail
        of its output (which goes to an unlinked file in the state dir)."""
        with tempfile.TemporaryFile(dir=self.state_dir, prefix="bake-") as log:
            try:
                proc = self._launch_image_bake(
                    image, facts, layer_root, lowers, setup_commands, network, log.fileno(), ids
                )
            except RuntimeError_ as exc:  # (bwrap's own words, when it said any)
                log.seek(0)
                said = log.read(4000).decode(errors="replace").strip()
                raise RuntimeError_(f"{exc}: {said}" if said else str(exc)) from exc
            try:
                delay = 0.005
                while proc.poll() is None:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.1)
            finally:
                if proc.poll() is None:  # cancelled (the client left): the bake stops with it
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, 9)
                    proc.wait()
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - (64 << 10)))
            return int(proc.returncode or 0), log.read()

    def _launch_image_bake(
        self,
        image: ImageRoot,
        facts: ImageFacts,
        layer_root: Path,
        lowers: tuple[Path, ...],
        setup_commands: Sequence[str],
        network: bool,
        log: int,
        ids: int | None = None,
    ) -> subprocess.Popen[bytes]:
        """Spawn an image bake's container, its output to ``log``.

        Ranged (``ids``: the first host id of the bake's range): bwrap keeps its
        capabilities and waits (``--userns-block-fd``) while the node writes its user
        namespace's maps (0..65535 onto the range, one more id onto the sandbox uid bwrap
        runs as); the image's layers are idmapped with the same range, earlier baked layers
        (the sandbox uid's on disk) with the sandbox uid as the image's user.

        With :class:`subprocess.Popen` on the event loop's thread, as a template's host is
        (``TemplateHost._launch``), not with the loop's own subprocess support: the launcher
        forks to make the idmap's user namespace, and a loop that runs ``preexec_fn`` from a
        ``pthread_atfork`` handler (uvloop's) would run it again in that fork.
        """
        assert self.bwrap_path is not None
        exe, _ = python_paths()
        fds = bw.FdSet()
        launch: bw.Launch | None = None
        block = info = (-1, -1)
        try:
            base = bw.base_args()
            if ids is not None:
                cap = base.index("--cap-drop")
                base[cap : cap + 2] = ["--cap-add", "ALL"]  # in its own user namespace only
                block, info = os.pipe2(os.O_CLOEXEC), os.pipe2(os.O_CLOEXEC)
                base += ["--unshare-user", "--userns-block-fd", str(block[0])]
                base += ["--info-fd", str(info[1])]
            argv = [self.bwrap_path, *base, *bw.etc_args(fds, network=network)]
            if network:
                argv += ["--share-net"]
            argv += python_args()
            argv += ["--tmpfs", "/.collimate", "--dir", "/.collimate/empty"]
            argv += ["--ro-bind", str(SUPERVISOR_DIR), "/.collimate/sup"]
            argv += ["--bind", str(layer_root), "/.collimate/out"]
            layers, lower_dirs = layer_args(lowers, ())
            argv += layers
            cfg = {
                "lowers": lower_dirs,
                "commands": list(setup_commands),
                "network": network,
                "syscall_policy": self.syscall_policy,
                "env": image_env(image, facts),
                "image": {
                    "uid": facts.uid,
                    "gid": facts.gid,
                    "workdir": "/" + image.working_dir.lstrip("/"),
                },
                "ranged": ids is not None,
            }
            argv += ["--dir", "/sandbox", "--chdir", "/", "--clearenv"]
            argv += supervisor_argv(str(exe), "bake", json.dumps(cfg))
            sid = self.sandbox_uid
            if ids is None:
                launch = bw.launch_preexec(
                    sid,
                    [*python_sources(), SUPERVISOR_DIR, layer_root, *image.baked],
                    bwrap=self.bwrap_path,
                    idmapped=image.layers,
                    idmap=(facts.uid, facts.gid),
                )
            else:
                whole = f"0 {ids} {BAKE_ID_COUNT}"
                launch = bw.launch_preexec(
                    sid,
                    [*python_sources(), SUPERVISOR_DIR, layer_root, *image.baked],
                    bwrap=self.bwrap_path,
                    mapped=[
                        (image.layers, whole, whole),
                        (image.baked, f"{sid} {ids + facts.uid} 1", f"{sid} {ids + facts.gid} 1"),
                    ],
                )
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=[*fds.fds, *([block[0], info[1]] if ids is not None else [])],
                close_fds=True,
                start_new_session=True,
                preexec_fn=launch,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeError_(
                bw.start_failure(self.bwrap_path, self.sandbox_uid, launch, exc)
            ) from exc
        finally:
            fds.close()
            for fd in (block[0], info[1]):
                if fd >= 0:
                    os.close(fd)
        self.note_host(proc.pid)
        if ids is not None:
            try:
                child = _bwrap_child_pid(info[0], proc)
                maps = f"0 {ids} {BAKE_ID_COUNT}\n{BAKE_ID_COUNT} {sid} 1\n"
                idmap.write_maps(child, maps, maps)
                os.write(block[1], b"1")
            except (OSError, ValueError) as exc:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
                proc.wait()
                raise RuntimeError_(
                    f"could not map the image bake's ids ({ids}..{ids + BAKE_ID_COUNT - 1}): {exc}"
                ) from exc
            finally:
                os.close(info[0])
                os.close(block[1])
        return proc

    async def _bake_bwrap(
        self,
        base: TemplateSpec,
        layer_root: Path,
        setup_commands: Sequence[str],
        network: bool,
    ) -> tuple[int, bytes]:
        assert self.bwrap_path is not None
        exe, _ = python_paths()
        fds = bw.FdSet()
        try:
            argv = [self.bwrap_path, *bw.base_args(), *bw.etc_args(fds, network=network)]
            if network:
                argv += ["--share-net"]
            argv += python_args()
            argv += ["--tmpfs", "/.collimate", "--dir", "/.collimate/empty"]
            argv += ["--ro-bind", str(SUPERVISOR_DIR), "/.collimate/sup"]
            argv += ["--bind", str(layer_root), "/.collimate/out"]
            # the base's layers and toolchain (a bake over a language template)
            layers, lowers = layer_args(base.layers, base.binds)
            argv += layers
            seen = as_sessions_see(base)
            cfg = {
                "lowers": lowers,
                "commands": list(setup_commands),
                "network": network,
                "syscall_policy": self.syscall_policy,
                "env": {
                    "PATH": search_path("/opt/collimate/bin", seen.path),
                    "HOME": "/sandbox",
                    "TMPDIR": "/tmp",
                    "LANG": "C.UTF-8",
                    "PYTHONPATH": "/opt/collimate/site",
                    "PYTHONUSERBASE": "/sandbox/.local",
                    "PIP_NO_CACHE_DIR": "1",
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                    **dict(seen.env),
                },
            }
            argv += ["--dir", "/sandbox", "--chdir", "/", "--clearenv"]
            argv += supervisor_argv(str(exe), "bake", json.dumps(cfg))
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
                        *python_sources(),
                        SUPERVISOR_DIR,
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


#: Why a bake on the one-uid path may fail where Docker's would not.
_ONE_UID_NOTE = (
    "\n(the setup ran with the image's User as its only id, as a node that is not root (or "
    "an image whose User is beyond 65535) runs it: files of the image's other owners show as "
    "nobody and cannot be changed, nothing can be chowned to another user, so e.g. apt-get "
    "cannot work; a node run as root maps the image's ids 0..65535)"
)


def _bwrap_child_pid(fd: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> int:
    """The ``child-pid`` bwrap writes to its ``--info-fd`` (``fd``, our end)."""
    import select

    data = b""
    deadline = time.monotonic() + timeout
    while b"}" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            raise ValueError(f"bwrap did not say its child's pid: {data[:200]!r}")
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise ValueError(f"bwrap did not say its child's pid: {data[:200]!r}")
            data += chunk
    return int(json.loads(data.decode())["child-pid"])
