"""The contract between the node's HTTP layer and its sandbox runtime.

The HTTP layer (``collimate_rl.node.app`` and friends) only ever talks to a
:class:`Runtime`; the drivers (``bwrap``, ``none``) implement it. Everything
here is asyncio: the node runs one event loop.

Vocabulary:
    template   a read-only filesystem layer plus an interpreter and a warm-up;
               a runtime keeps one warm *template host* per template.
    session    a copy-on-write fork of its template; keeps its files across
               execs; can itself be forked N ways.
    exec       one run of a command / code / argv list inside a session.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = [
    "OUTPUT_CAP_BYTES",
    "ExecOutcome",
    "ExecSpec",
    "ImageRoot",
    "ImageWithoutPython",
    "ImageWithoutShell",
    "Isolation",
    "Limits",
    "Runtime",
    "RuntimeError_",
    "ServiceNotReady",
    "ServiceSpec",
    "SessionBusy",
    "SessionHandle",
    "SessionLost",
    "TemplateSpec",
]

#: Merged stdout+stderr is capped at 16 MiB per exec (the contract's cap).
OUTPUT_CAP_BYTES = 16 * 1024 * 1024


class Isolation(str, enum.Enum):
    """The isolation level in force, reported by ``/v1/health``."""

    BWRAP = "bwrap"
    NONE = "none"


@dataclass(frozen=True)
class Limits:
    """Per-exec resource limits applied inside the sandbox."""

    cpu_seconds: int = 60  # RLIMIT_CPU ceiling; the exec's own timeout usually bites first
    address_space_bytes: int = 4 << 30  # RLIMIT_AS per process
    processes: int = 64  # RLIMIT_NPROC, counted per session
    file_size_bytes: int = 256 << 20  # RLIMIT_FSIZE
    open_files: int = 256  # RLIMIT_NOFILE
    session_disk_bytes: int = 1 << 30  # size of the session's private writable layer
    output_cap_bytes: int = OUTPUT_CAP_BYTES


@dataclass(frozen=True)
class ServiceSpec:
    """A long-lived server every session of a template runs (``bwrap`` driver only).

    Attributes:
        cmd: shell command started in ``/sandbox`` when the session is created.
        ports: TCP ports it listens on inside the session (its loopback); each
            becomes an ``endpoints`` entry reachable on the node's loopback.
        http: a path polled (through the bridge) until it answers < 400
            before the create returns; empty: do not wait.
        http_timeout_s: how long to poll ``http``.
        argv: run this program directly instead of ``/bin/sh -c cmd`` (an image's
            ``Entrypoint`` + ``Cmd``: the image need not have a shell); ``argv[0]`` is
            looked up on the session's ``PATH``.
    """

    cmd: str
    ports: tuple[int, ...]
    http: str = ""
    http_timeout_s: float = 60.0
    argv: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImageRoot:
    """An OCI image as a template's root filesystem (``bwrap`` driver only).

    Its sessions see the layers, stacked read-only under a copy-on-write upper layer of
    their own, as ``/``; the node's runtime stays outside that root (docs/architecture.md,
    "Image templates").

    Attributes:
        layers: unpacked layer folders, lowest first (overlay-style whiteouts).
        env: the image's ``Env`` (``NAME=value`` entries already split).
        working_dir: the image's ``WorkingDir`` (an exec's cwd; ``/`` when unset).
        user: the image's ``User`` (``name``, ``uid``, ``name:group``, ``uid:gid``; empty:
            root): whom sessions run as, mapped onto the sandbox uid.
        entrypoint: the image's ``Entrypoint``.
        cmd: the image's ``Cmd``.
        ref: the reference it was pulled as, for messages and listings.
        baked: layers a bake's setup commands left over the image (``LocalRuntime.bake_image``),
            lowest first, stacked above ``layers``. Their files are the sandbox uid's on disk
            (the setup ran as the image's ``User`` mapped onto it), so they are bound as
            they are, not idmapped as the image's own layers are, and show as the ``User``'s.

    >>> root = ImageRoot(layers=(Path("/store/l/1"),), baked=(Path("/state/layers/t/upper"),))
    >>> root.working_dir, [str(p) for p in root.stack]
    ('/', ['/store/l/1', '/state/layers/t/upper'])
    """

    layers: tuple[Path, ...]
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str = "/"
    user: str = ""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    ref: str = ""
    baked: tuple[Path, ...] = ()

    @property
    def stack(self) -> tuple[Path, ...]:
        """Every layer of the image's root as its sessions see it, lowest first (the
        image's, then the baked ones; not the skeleton or shim the node adds)."""
        return (*self.layers, *self.baked)


@dataclass(frozen=True)
class TemplateSpec:
    """A template: a read-only layer, an interpreter and a warm-up.

    Attributes:
        template_id: the wire id (``POST /v1/sessions {"template_id"}``).
        layer: host directory shown read-only under the session's writable
            ``/sandbox`` (``None``: an empty one). Baked templates stack
            several layers, lowest first.
        interpreter: runs ``code`` execs; ``"python3"`` means the node's own
            warm Python (fork-server, no start-up cost per exec).
        preload: modules the warm interpreter imports before forking.
        env: extra environment for every exec (and the service).
        service: a server each session runs (see :class:`ServiceSpec`).
        network: sessions are networked: their processes may open IP sockets
            and reach the node's egress proxy through a relay on their own
            loopback (``bwrap`` driver; the node applies each session's
            policy, see docs/egress.md).
        binds: host paths shown read-only at the same path inside (a
            toolchain outside ``/usr``, e.g. a Rust sysroot under ``/root``), or,
            when a session's own ``/tmp`` (``/dev``, ``/proc``, ``/sandbox``) would
            hide them there, at ``/opt/collimate/host/<path>``; ``path`` and
            ``env`` entries inside them follow (``host_paths.bind_target``).
        path: directories put on ``PATH``, after the node's Python.
        limits: this template's exec limits (``None``: the runtime's).
        image: the template's root filesystem is this image (see :class:`ImageRoot`);
            ``layers``, ``binds``, ``path`` and ``preload`` do not apply, ``code`` execs
            run the image's own ``python3``.
    """

    template_id: str
    layers: tuple[Path, ...] = ()
    interpreter: str = "python3"
    preload: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    service: ServiceSpec | None = None
    network: bool = False
    binds: tuple[Path, ...] = ()
    path: tuple[str, ...] = ()
    limits: Limits | None = None
    image: ImageRoot | None = None


@dataclass(frozen=True)
class ExecSpec:
    """One exec, already validated by the HTTP layer.

    Exactly one of ``command`` / ``commands`` / ``code`` is used, with the
    contract's precedence command > commands > code. ``files`` are written
    byte-exact (no newline added) before it runs; relative paths are under
    ``/sandbox``. ``seed`` is always set (the node draws one if the caller
    did not).
    """

    seed: str
    timeout_seconds: float = 30.0
    command: str | None = None
    commands: tuple[tuple[str, ...], ...] | None = None
    code: str | None = None
    files: tuple[tuple[str, bytes], ...] = ()
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ExecOutcome:
    """What an exec produced. Task failures are data, never exceptions.

    ``exit_code`` is -1 on timeout (``output`` then ends with the contract's
    ``"timeout after <t>s"`` message) and ``-signal`` when killed by a signal.
    """

    exit_code: int
    output: bytes
    exec_time_ms: float
    timed_out: bool = False
    truncated: bool = False
    seed_ack: str = "no-ack"  # "verified" when the sandbox confirmed the seed


class RuntimeError_(Exception):
    """An infrastructure failure of the runtime (maps to 5xx, never to a reward)."""


class ImageWithoutPython(ValueError):
    """A ``code`` exec (or a grade) in a session of an image that has no ``python3``
    (a bad request: maps to 400, never to a reward)."""


class ImageWithoutShell(ValueError):
    """Setup commands over an image that has no ``/bin/sh`` to run them (a bad request:
    maps to 400)."""


class SessionLost(RuntimeError_):
    """The session's sandbox died or vanished (maps to 410 ``session_gone``)."""


class ServiceNotReady(RuntimeError_):
    """A session's service exited or did not answer its readiness probe in time."""


class SessionBusy(RuntimeError_):
    """The operation needs a quiescent session (fork while an exec runs)."""


class SessionHandle(Protocol):
    """A live session inside a runtime."""

    @property
    def session_id(self) -> str: ...

    async def exec(self, spec: ExecSpec) -> ExecOutcome:
        """Run one exec; concurrent execs on one session are allowed."""
        ...

    async def fork(self, child_ids: Sequence[str]) -> list[SessionHandle]:
        """Copy-on-write fork into ``len(child_ids)`` new sessions.

        Children see the parent's files as of now; afterwards every write is
        private to its writer. All or nothing: on failure no child survives.
        Raises :class:`SessionBusy` if an exec is running in the parent.
        """
        ...

    async def close(self) -> None:
        """Destroy the session and every process in it. Idempotent."""
        ...


class Runtime(Protocol):
    """A sandbox runtime: template hosts and their sessions."""

    isolation: Isolation

    async def start(self) -> None:
        """Bring up the built-in templates (and any warm pool)."""
        ...

    def templates(self) -> list[str]: ...

    async def add_template(self, spec: TemplateSpec) -> None: ...

    async def create_session(self, template_id: str, session_id: str) -> SessionHandle:
        """Fork a new session from the template's warm host.

        Raises KeyError for an unknown template, RuntimeError_ on failure.
        """
        ...

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
        """Run setup commands on top of ``base`` and freeze the result as a new template.

        ``service`` makes every session run a server (see :class:`ServiceSpec`);
        ``env`` is added to the template's environment. Over an image template the
        commands run in the image's root, as :meth:`bake_image` runs them.
        """
        ...

    async def bake_image(
        self, spec: TemplateSpec, setup_commands: Sequence[str], *, network: bool = False
    ) -> TemplateSpec:
        """Run setup commands in the root filesystem of ``spec.image`` (as its ``User``, with
        its ``Env``, ``WorkingDir`` and ``/bin/sh``; network only with ``network``) and
        register ``spec`` with their result as one more layer over the image's.

        Raises:
            ImageWithoutShell: the image has no ``/bin/sh`` (a ``ValueError``).
            RuntimeError_: a command failed (the error carries its output's tail).
        """
        ...

    async def close(self) -> None:
        """Stop everything; leave no process, mount, folder or socket behind."""
        ...
