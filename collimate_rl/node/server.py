"""Serving the node: uvicorn over TCP or a unix socket, drain on SIGTERM, clean stop.

On the first SIGTERM or SIGINT the node drains: ``/v1/health`` says
``draining``, new creates/execs/forks get 503 ``draining``, in-flight work
finishes (bounded by ``drain_timeout``), then the server stops, every session
and the runtime are closed and the socket file is removed. A second signal
stops waiting for in-flight work (cleanup still runs).

>>> args = build_parser().parse_args(["--socket", "/tmp/n.sock", "--isolation", "none"])
>>> args.socket, args.isolation, args.max_sessions
('/tmp/n.sock', 'none', 4096)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import os
import shutil
import signal
import socket
import stat
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Final

import uvicorn

from collimate_rl._bearer import read_token_file
from collimate_rl._binds import DEFAULT_HOST, exposure_warning
from collimate_rl.node.app import create_app
from collimate_rl.node.core import Node, NodeConfig
from collimate_rl.node.egress.settings import EgressSettings
from collimate_rl.node.image_templates import ImageSettings
from collimate_rl.node.logs import LOG_FORMATS, configure_logging
from collimate_rl.node.runtime.base import Runtime, RuntimeError_

__all__ = [
    "SOCKET_MODE",
    "NodeServer",
    "bind_tcp_socket",
    "bind_unix_socket",
    "build_parser",
    "config_from_args",
    "main",
    "make_runtime",
    "run_from_args",
    "serve",
]

logger = logging.getLogger("collimate_rl.node")

#: Mode of the unix socket file: owner and group may connect, nobody else.
SOCKET_MODE: Final = 0o660

RuntimeFactory = Callable[..., Runtime]


def bind_unix_socket(path: str | os.PathLike[str], mode: int = SOCKET_MODE) -> socket.socket:
    """Bind and listen on a unix socket at ``path`` with file mode ``mode``.

    A stale socket file (nobody listening) is replaced; a live one is an error.
    """
    path = os.fspath(path)
    if os.path.exists(path):
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            raise FileExistsError(f"{path} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # stale: left by a node that died
        else:
            raise OSError(f"another node is already listening on {path}")
        finally:
            probe.close()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o777 & ~mode)  # never world-connectable, not even briefly
    try:
        sock.bind(path)
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(old_umask)
    os.chmod(path, mode)
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def bind_tcp_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """Bind and listen on ``host:port`` (0 picks a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=1024, reuse_port=False)
    sock.setblocking(False)
    return sock


class NodeServer(uvicorn.Server):
    """A uvicorn server whose SIGTERM/SIGINT drains the node before stopping.

    Args:
        config: the uvicorn config (its ``app`` is the node's app).
        node: the node to drain.
    """

    def __init__(self, config: uvicorn.Config, node: Node) -> None:
        super().__init__(config)
        self.node = node
        self.signals_seen = 0
        self._drain_task: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Deliberately not recorded in ``_captured_signals``: uvicorn would
        # re-raise it after shutdown and the process would die of SIGTERM
        # instead of exiting 0 after a clean drain.
        self.signals_seen += 1
        if self.signals_seen > 1:
            self.should_exit = True

    def request_drain(self) -> None:
        """Start draining as if SIGTERM had arrived (thread-safe enough: a flag)."""
        self.signals_seen = max(self.signals_seen, 1)

    async def on_tick(self, counter: int) -> bool:
        if _early_stop:  # noted after start-up looked, before uvicorn took the signals over
            self.request_drain()
        if self.signals_seen and self._drain_task is None:
            self._drain_task = asyncio.create_task(self._drain(), name="node-drain")
        return await super().on_tick(counter)

    async def _drain(self) -> None:
        self.node.begin_drain()
        await self.node.wait_drained(self.node.config.drain_timeout)
        self.should_exit = True


def make_runtime(
    isolation: str | None = None,
    *,
    state_dir: Path | None = None,
    factory: str | RuntimeFactory | None = None,
    share_site_packages: bool = False,
    sandbox_uid: int | None = None,
    languages: str | None = None,
) -> Runtime:
    """Build the runtime: ``factory`` (a callable or ``"module:callable"``) or the real one.

    ``isolation`` ``None``/``"auto"`` means bwrap on Linux. ``share_site_packages``
    exposes the node's site-packages read-only in the sandboxes (docs/services.md).
    ``sandbox_uid`` is the host uid sandboxes run as (default: the runtime's own pick).
    ``languages`` picks the built-in language templates (``"auto"``: every toolchain
    found; ``"none"``; or ``"c,cpp,java"``).
    """
    if isolation == "auto":
        isolation = None
    if isinstance(factory, str):
        module_name, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module_name), attr or "create_runtime")
    if factory is None:
        try:
            # Imported by name: the runtime package is optional at type-check time.
            runtime_pkg = importlib.import_module("collimate_rl.node.runtime")
            factory = runtime_pkg.create_runtime
        except (ImportError, AttributeError) as exc:  # pragma: no cover - install-dependent
            raise RuntimeError(
                "the sandbox runtime is not available; install the `node` extra"
            ) from exc
    if not callable(factory):
        raise TypeError(f"runtime factory {factory!r} is not callable")
    extra: dict[str, Any] = {"share_site_packages": True} if share_site_packages else {}
    if sandbox_uid is not None:
        extra["sandbox_uid"] = sandbox_uid
    if languages is not None:
        extra["languages"] = languages
    runtime: Runtime = factory(isolation, state_dir=state_dir, **extra)
    return runtime


_early_stop: list[int] = []


def _note_early_signal(sig: int, frame: FrameType | None) -> None:
    _early_stop.append(sig)


async def _serve_async(
    runtime: Runtime,
    sock: socket.socket,
    where: str,
    config: NodeConfig,
    log_level: str,
    token: str | None = None,
    own_logging: bool = False,
    metrics_token: str | None = None,
) -> None:
    app = create_app(
        runtime, config, manage_lifecycle=False, token=token, metrics_token=metrics_token
    )
    node: Node = app.state.node
    try:
        # Fails here, before anything is served, if the runtime cannot start.
        # A signal noted during start-up (see run_from_args) stops it cleanly.
        await node.start()
        if _early_stop:
            logger.info("stop requested during start-up; closing")
            return
        uv_config = uvicorn.Config(
            app,
            lifespan="off",
            log_level=log_level,
            # our own lines carry the request id (request_ids.py); uvicorn's would not
            access_log=False,
            # configured by run_from_args (--log-format): uvicorn's lines go through it too
            log_config=None if own_logging else uvicorn.config.LOGGING_CONFIG,
            timeout_graceful_shutdown=2,  # the drain already waited for in-flight work
            timeout_keep_alive=30,
            server_header=False,
        )
        server = NodeServer(uv_config, node)
        isolation = getattr(runtime.isolation, "value", runtime.isolation)
        info: dict[str, Any] = getattr(runtime, "info", dict)()
        logger.info(
            "collimate node serving on %s (isolation: %s, %s, event loop: %s%s)",
            where,
            isolation,
            "bearer token required" if token is not None else "no token",
            type(asyncio.get_running_loop()).__module__.split(".")[0],
            f", zygote loop: {info['zygote_loop']}" if info.get("zygote_loop") else "",
        )
        if config.egress.customized:
            logger.warning(
                "egress overrides in force: resolve %s, internet %s, resolve-only %s",
                {k: [str(a) for a in v] for k, v in config.egress.resolve.items()},
                [str(n) for n in config.egress.internet],
                config.egress.resolve_only,
            )
        await server.serve(sockets=[sock])
    finally:
        await node.close()


def run_event_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on uvloop's event loop when it is installed (the ``node`` extra has it).

    Much of the node's own CPU goes to event-loop plumbing: per request, and per message
    to and from a grading worker. uvloop does that work for less CPU and latency
    (``benchmarks/history.md``, "Round 12"). Without uvloop, asyncio's own loop serves the
    same requests the same way.

    >>> async def loop_name() -> None:
    ...     print(type(asyncio.get_running_loop()).__module__.split(".")[0])
    >>> run_event_loop(loop_name())
    uvloop
    """
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


def _note_listen_socket(runtime: Runtime, path: Path) -> None:
    # The local runtime records it so a node restarting after a crash removes
    # it if it was left stale at another path (same path: bind_unix_socket does).
    note = getattr(runtime, "note_listen_socket", None)
    if callable(note):
        note(path.resolve())


def serve(
    *,
    host: str = DEFAULT_HOST,
    port: int = 8080,
    socket_path: str | os.PathLike[str] | None = None,
    isolation: str | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    config: NodeConfig | None = None,
    runtime: Runtime | None = None,
    runtime_factory: str | RuntimeFactory | None = None,
    log_level: str = "info",
    share_site_packages: bool = False,
    token: str | None = None,
    sandbox_uid: int | None = None,
    languages: str | None = None,
    own_logging: bool = False,
    metrics_token: str | None = None,
) -> None:
    """Run a node in the foreground until SIGTERM/SIGINT, then drain and stop cleanly.

    Args:
        host: TCP host (ignored with ``socket_path``).
        port: TCP port (ignored with ``socket_path``).
        socket_path: serve on this unix socket instead of TCP (removed on stop).
        isolation: ``"auto"``/``None`` (bwrap on Linux), ``"bwrap"`` or ``"none"``.
        state_dir: where the runtime keeps session folders.
        config: the node's tunables.
        runtime: a ready-made runtime (overrides ``isolation``/``runtime_factory``).
        runtime_factory: a callable or ``"module:callable"`` building the runtime.
        log_level: uvicorn's log level.
        share_site_packages: expose the node's site-packages read-only in the
            sandboxes (operator opt-in, see docs/services.md).
        token: require ``Authorization: Bearer <token>`` on every request.
        sandbox_uid: the host uid sandboxes run as (when the node is root).
        languages: the built-in language templates to offer (see :func:`make_runtime`).
        metrics_token: with ``token``, a read-only token for ``GET /metrics`` (a scraper's).
        own_logging: logging is configured already (``configure_logging``): uvicorn's
            lines go through it instead of uvicorn's own handlers.

    Example (blocks, so not run here)::

        serve(socket_path="/run/collimate-session/serve.sock", isolation="auto")
    """
    config = config or NodeConfig()
    if socket_path is None:
        warning = exposure_warning(
            host,
            "the node",
            hint="it runs code for them: keep it behind a firewall"
            + ("" if token is not None else " and require --token-file"),
        )
        if warning is not None:
            logger.warning("%s", warning)
        elif token is None:
            logger.info("TCP without a token: every local user can use this node (--token-file)")
    sock = bind_unix_socket(socket_path) if socket_path is not None else bind_tcp_socket(host, port)
    where = (
        f"unix:{os.fspath(socket_path)}"
        if socket_path is not None
        else "http://{}:{}".format(*sock.getsockname()[:2])
    )
    try:
        if runtime is None:
            runtime = make_runtime(
                isolation,
                state_dir=Path(state_dir) if state_dir is not None else None,
                factory=runtime_factory,
                share_site_packages=share_site_packages,
                sandbox_uid=sandbox_uid,
                languages=languages,
            )
        if socket_path is not None:
            _note_listen_socket(runtime, Path(socket_path))
        run_event_loop(
            _serve_async(
                runtime,
                sock,
                where,
                config,
                log_level,
                token,
                own_logging=own_logging,
                metrics_token=metrics_token,
            )
        )
    finally:
        sock.close()
        if socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(socket_path)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The ``serve`` flags, on a new parser or added to ``parser`` (for a subcommand)."""
    defaults = NodeConfig()
    p = parser or argparse.ArgumentParser(
        prog="collimate serve", description="Run the local collimate sandbox node."
    )
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"TCP host (default {DEFAULT_HOST}; a wider address such as 0.0.0.0 logs a "
        "warning: everyone who reaches the port can run code here)",
    )
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080)")
    p.add_argument("--socket", default=None, help="serve on this unix socket instead of TCP")
    p.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="require 'Authorization: Bearer <token>' with the token in FILE (not readable "
        "by others) on every request; clients pass token= or set $COLLIMATE_SERVE_TOKEN. "
        "Recommended for TCP whenever the host has other users",
    )
    p.add_argument(
        "--metrics-token-file",
        default=None,
        metavar="FILE",
        help="with --token-file: a second token, in FILE, that opens GET /metrics and "
        "nothing else (for a Prometheus server: docs/operations.md)",
    )
    p.add_argument(
        "--isolation",
        choices=("auto", "bwrap", "none"),
        default="auto",
        help="sandbox driver; auto = bwrap on Linux, none = NO isolation (dev only)",
    )
    p.add_argument(
        "--state-dir", default=None, help="folder for session state (default: a temp folder)"
    )
    p.add_argument(
        "--max-inflight",
        type=int,
        default=defaults.max_inflight,
        help="execs running at once (default: CPU count, at least 2)",
    )
    p.add_argument(
        "--queue",
        type=int,
        default=defaults.queue,
        help=f"execs that may wait for a slot; past that, 503 at_capacity (default {defaults.queue})",
    )
    p.add_argument(
        "--max-sessions",
        type=int,
        default=defaults.max_sessions,
        help=f"live sessions allowed, warm pool not counted (default {defaults.max_sessions})",
    )
    p.add_argument(
        "--session-ttl",
        type=float,
        default=defaults.session_ttl,
        help=f"idle seconds before a session is reaped, 0 = never (default {defaults.session_ttl:g})",
    )
    p.add_argument(
        "--pool-size",
        type=int,
        default=defaults.pool_size,
        help=f"warm sessions kept ready per template (default {defaults.pool_size})",
    )
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=defaults.drain_timeout,
        help=f"seconds SIGTERM waits for in-flight work (default {defaults.drain_timeout:g})",
    )
    p.add_argument(
        "--log-level", default="info", choices=("critical", "error", "warning", "info", "debug")
    )
    p.add_argument(
        "--log-format",
        default="text",
        choices=LOG_FORMATS,
        help="text lines, or one JSON object per line (time, level, logger, message, "
        "request_id, and the access line's method, path, status, duration_ms)",
    )
    p.add_argument(
        "--share-site-packages",
        action="store_true",
        help="expose this environment's site-packages read-only in every sandbox "
        "(lets template services import e.g. openenv-core; see docs/services.md)",
    )
    p.add_argument(
        "--exit-with-fd",
        type=int,
        default=None,
        metavar="FD",
        help="drain and stop when this inherited pipe's read end reaches EOF, i.e. when "
        "every process holding its write end has exited (LocalNode passes one)",
    )
    p.add_argument(
        "--owned-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --exit-with-fd: a folder the owner made for this node (its socket, state "
        "and log), removed when the node stops because its owner is gone",
    )
    egress = p.add_argument_group(
        "egress (networked templates, docs/egress.md)",
        "Operator settings of the egress proxy. The defaults are the strict ones; the "
        "overrides exist for air-gapped mirrors and for tests that serve a stand-in "
        "internet on other loopback addresses.",
    )
    egress.add_argument(
        "--egress-resolve",
        action="append",
        default=[],
        metavar="NAME=IP[,IP]",
        help="the proxy resolves NAME (or *.SUFFIX) to these addresses instead of asking DNS",
    )
    egress.add_argument(
        "--egress-internet",
        action="append",
        default=[],
        metavar="CIDR",
        help="treat this non-public range as the internet (the node's own sockets stay "
        "unreachable)",
    )
    egress.add_argument(
        "--egress-resolve-only",
        action="store_true",
        help="never ask the system resolver: only --egress-resolve names can be reached",
    )
    egress.add_argument(
        "--egress-connect-timeout",
        type=float,
        default=defaults.egress.connect_timeout,
        metavar="SECONDS",
        help=f"upstream connect timeout (default {defaults.egress.connect_timeout:g})",
    )
    p.add_argument(
        "--sandbox-uid",
        type=int,
        default=None,
        metavar="UID",
        help="host uid the sandboxes run as when the node is root (default: the first uid "
        "from 2000000000 up that no account, group or subordinate id range uses)",
    )
    p.add_argument(
        "--languages",
        default=None,
        metavar="LIST",
        help="built-in language templates: auto (every toolchain found, the default), none, "
        "or a comma list such as c,cpp,java (env COLLIMATE_LANGUAGES)",
    )
    images = p.add_argument_group(
        "images (image templates: POST /v1/templates with an image)",
        "Where pulled OCI images are kept, and how registries are reached.",
    )
    images.add_argument(
        "--image-store",
        type=Path,
        default=None,
        metavar="DIR",
        help="the image store (default: images under the cache dir, $COLLIMATE_CACHE_DIR or "
        "~/.cache/collimate-rl)",
    )
    images.add_argument(
        "--image-store-max-bytes",
        type=int,
        default=None,
        metavar="N",
        help="the store's quota on blobs and unpacked layers (default: none)",
    )
    images.add_argument(
        "--insecure-registry",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="speak plain HTTP to this registry (loopback registries always are); repeatable",
    )
    p.add_argument("--runtime-factory", default=None, help=argparse.SUPPRESS)
    return p


#: Set once the owner's pipe (``--exit-with-fd``) reads EOF.
_owner_gone = threading.Event()


def _exit_with(fd: int) -> None:
    """SIGTERM this process (a drain) once ``fd`` reads EOF: its owner is gone.

    A pipe, not ``PR_SET_PDEATHSIG``: that fires when the *thread* that started
    the node exits, and an owner may start its node from any thread.
    """

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 1):
                pass
        _owner_gone.set()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="collimate-owner-watch", daemon=True).start()


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    """The :class:`NodeConfig` the parsed flags describe."""
    if args.max_inflight < 1 or args.queue < 0 or args.max_sessions < 1 or args.pool_size < 0:
        raise SystemExit(
            "collimate serve: --max-inflight and --max-sessions must be >= 1, "
            "--queue and --pool-size >= 0"
        )
    try:
        egress = EgressSettings.from_flags(
            resolve=args.egress_resolve,
            internet=args.egress_internet,
            resolve_only=args.egress_resolve_only,
            connect_timeout=args.egress_connect_timeout,
        )
    except ValueError as exc:
        raise SystemExit(f"collimate serve: {exc}") from None
    max_bytes = getattr(args, "image_store_max_bytes", None)
    if max_bytes is not None and max_bytes < 1:
        raise SystemExit("collimate serve: --image-store-max-bytes must be >= 1")
    images = ImageSettings(
        store_dir=getattr(args, "image_store", None),
        max_bytes=max_bytes,
        insecure_registries=tuple(getattr(args, "insecure_registry", None) or ()),
    )
    return NodeConfig(
        max_inflight=args.max_inflight,
        queue=args.queue,
        max_sessions=args.max_sessions,
        session_ttl=args.session_ttl if args.session_ttl and args.session_ttl > 0 else None,
        pool_size=args.pool_size,
        drain_timeout=args.drain_timeout,
        egress=egress,
        images=images,
    )


def run_from_args(args: argparse.Namespace) -> int:
    """Serve with parsed ``serve`` flags; the exit status."""
    configure_logging(args.log_level, args.log_format)
    if args.isolation == "none":
        print(
            "collimate serve: --isolation none runs code WITHOUT a sandbox (dev only)",
            file=sys.stderr,
        )
    config = config_from_args(args)
    try:
        token = read_token_file(args.token_file) if args.token_file is not None else None
    except (OSError, ValueError) as exc:
        print(f"collimate serve: --token-file: {exc}", file=sys.stderr)
        return 2
    metrics_token = None
    if args.metrics_token_file is not None:
        if token is None:
            print("collimate serve: --metrics-token-file needs --token-file", file=sys.stderr)
            return 2
        try:
            metrics_token = read_token_file(args.metrics_token_file)
        except (OSError, ValueError) as exc:
            print(f"collimate serve: --metrics-token-file: {exc}", file=sys.stderr)
            return 2
    # Until the event loop takes over, a SIGTERM/SIGINT is only noted, so the
    # socket and runtime set up so far are still cleaned up.
    previous = {
        sig: signal.signal(sig, _note_early_signal) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    if args.exit_with_fd is not None:
        _exit_with(args.exit_with_fd)
    try:
        serve(
            host=args.host,
            port=args.port,
            socket_path=args.socket,
            isolation=args.isolation,
            state_dir=args.state_dir,
            config=config,
            runtime_factory=args.runtime_factory,
            log_level=args.log_level,
            share_site_packages=args.share_site_packages,
            token=token,
            sandbox_uid=args.sandbox_uid,
            languages=args.languages,
            own_logging=True,
            metrics_token=metrics_token,
        )
    except (RuntimeError_, RuntimeError, OSError, ImportError, AttributeError, ValueError) as exc:
        # The boundary to the shell: one line saying what failed (the traceback
        # only at --log-level debug).
        logger.debug("the node failed", exc_info=True)
        print(f"collimate serve: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if args.owned_dir is not None and _owner_gone.is_set():
            # nobody is left to remove it (or to read the log in it)
            shutil.rmtree(args.owned_dir, ignore_errors=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``collimate serve`` / ``python -m collimate_rl.node serve``."""
    args = build_parser().parse_args(argv)
    return run_from_args(args)
