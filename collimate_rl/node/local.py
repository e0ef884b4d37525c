"""``LocalNode``: start a private node in a subprocess for tests, notebooks and the env suite.

The node runs as ``python -m collimate_rl.node serve`` on a fresh unix socket
(or a free TCP port) inside a temporary folder. Leaving the ``with`` block
(normally or by an exception) drains and stops it, and removes the folder;
an ``atexit`` hook stops any node a caller forgot.

>>> with LocalNode(isolation="none") as node:  # doctest: +SKIP
...     client = node.client()
...     client.exec_once("python3", code="print(6 * 7)")["stdout"]
'42\\n'
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from collimate_rl._bearer import bearer_headers, new_token
from collimate_rl.errors import CollimateError
from collimate_rl.wire.daemon import CollimateClient

__all__ = ["LocalNode"]


#: ``python -m collimate_rl.node``, except that the current directory does not come first on
#: ``sys.path``: a checkout of another version there would run a node whose grading harness
#: differs from this client's, and every grade would silently take the slow path.
_RUN_NODE = (
    "import runpy, sys; sys.path.pop(0); "
    "runpy.run_module('collimate_rl.node', run_name='__main__', alter_sys=True)"
)

_LIVE: set[LocalNode] = set()  # strong refs: a forgotten node is still stopped at exit
_ATEXIT_LOCK = threading.Lock()
_atexit_registered = False


def _stop_all_at_exit() -> None:
    for node in list(_LIVE):
        with contextlib.suppress(Exception):
            node.stop(timeout=5.0)


def _register_atexit() -> None:
    global _atexit_registered
    with _ATEXIT_LOCK:
        if not _atexit_registered:
            atexit.register(_stop_all_at_exit)
            _atexit_registered = True


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to a new file only its owner can read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _url_host(host: str) -> str:
    """``host`` as it appears in a URL (IPv6 literals in brackets).

    >>> _url_host("10.0.0.5"), _url_host("::1")
    ('10.0.0.5', '[::1]')
    """
    return f"[{host}]" if ":" in host else host


class LocalNode:
    """A node in a subprocess, stopped and cleaned up on exit.

    Args:
        isolation: ``"auto"`` (bwrap on Linux), ``"bwrap"`` or ``"none"``
            (no sandbox: dev only).
        tcp: serve on a free TCP port of ``127.0.0.1`` instead of a unix socket,
            with a fresh bearer token (:attr:`token`) that other local users
            cannot read (a unix socket is private by its file mode).
        host: serve on TCP on this address instead (implies ``tcp``, token included),
            e.g. a cluster node's own IP so other machines can reach it.
        port: the TCP port (default: a free one).
        max_inflight, queue, max_sessions, session_ttl, pool_size, drain_timeout:
            the ``serve`` flags of the same names (``None``: the node's default).
        startup_timeout: seconds to wait for ``/v1/health``.
        share_site_packages: ``--share-site-packages`` (sandboxes import this
            environment's packages read-only; see docs/services.md).
        image_store: the image store (``--image-store``; default: under the cache dir).
        image_store_max_bytes: its quota (``--image-store-max-bytes``).
        insecure_registries: registries spoken to in plain HTTP (``--insecure-registry``).
        extra_args: more ``serve`` flags, verbatim.
        metrics_token: over TCP, a read-only token for ``GET /metrics``
            (``--metrics-token-file``: what a Prometheus server is given).
        workdir_root: make :attr:`workdir` inside this folder (default: the temp dir).

    Attributes:
        socket_path: the unix socket (``None`` over TCP).
        base_url: ``http://<host>:<port>`` over TCP, ``http://localhost`` over the socket.
        token: the node's bearer token over TCP (``None`` over the socket);
            :meth:`client` and :meth:`http` send it.
        workdir: the temporary folder holding the socket, state and log.
    """

    def __init__(
        self,
        *,
        isolation: str = "auto",
        tcp: bool = False,
        host: str | None = None,
        port: int | None = None,
        max_inflight: int | None = None,
        queue: int | None = None,
        max_sessions: int | None = None,
        session_ttl: float | None = None,
        pool_size: int | None = None,
        drain_timeout: float | None = None,
        startup_timeout: float = 60.0,
        share_site_packages: bool = False,
        image_store: str | Path | None = None,
        image_store_max_bytes: int | None = None,
        insecure_registries: tuple[str, ...] = (),
        extra_args: tuple[str, ...] = (),
        workdir_root: str | Path | None = None,
        metrics_token: str | None = None,
    ) -> None:
        self.isolation = isolation
        self.tcp = tcp or host is not None or port is not None
        self.host = host or "127.0.0.1"
        self.port = port
        self.startup_timeout = startup_timeout
        flags: dict[str, Any] = {
            "--max-inflight": max_inflight,
            "--queue": queue,
            "--max-sessions": max_sessions,
            "--session-ttl": session_ttl,
            "--pool-size": pool_size,
            "--drain-timeout": drain_timeout,
            "--image-store": image_store,
            "--image-store-max-bytes": image_store_max_bytes,
        }
        self._flags = [s for k, v in flags.items() if v is not None for s in (k, str(v))]
        self._flags += ["--share-site-packages"] if share_site_packages else []
        self._flags += [s for host in insecure_registries for s in ("--insecure-registry", host)]
        self._flags += list(extra_args)
        self._drain_timeout = drain_timeout if drain_timeout is not None else 30.0
        self.workdir_root = workdir_root
        self.metrics_token = metrics_token
        self.workdir: Path | None = None
        self.socket_path: Path | None = None
        self.base_url = "http://localhost"
        self.token: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._owner_w: int | None = None
        self._clients: list[Any] = []

    # -- lifecycle -------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The node process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path | None:
        """The node's combined stdout/stderr log (inside :attr:`workdir`)."""
        return self.workdir / "node.log" if self.workdir is not None else None

    def start(self) -> LocalNode:
        """Start the node and wait until ``/v1/health`` answers."""
        if self._proc is not None:
            return self
        _register_atexit()
        self.workdir = Path(tempfile.mkdtemp(prefix="collimate-node-", dir=self.workdir_root))
        argv = [sys.executable, "-c", _RUN_NODE, "serve"]
        argv += ["--isolation", self.isolation, "--state-dir", str(self.workdir / "state")]
        if self.tcp:
            port = self.port or _free_port(self.host)
            argv += ["--host", self.host, "--port", str(port)]
            self.base_url = f"http://{_url_host(self.host)}:{port}"
            self.token = new_token()
            token_file = self.workdir / "token"
            _write_private(token_file, self.token)
            argv += ["--token-file", str(token_file)]
            if self.metrics_token is not None:
                _write_private(self.workdir / "metrics-token", self.metrics_token)
                argv += ["--metrics-token-file", str(self.workdir / "metrics-token")]
        else:
            self.socket_path = self.workdir / "node.sock"
            argv += ["--socket", str(self.socket_path)]
        # The node drains by itself when this process dies, however it dies: it
        # watches a pipe whose only write end we hold (non-inheritable).
        # Then it also removes this folder: nobody else is left to.
        owner_r, self._owner_w = os.pipe()
        argv += ["--exit-with-fd", str(owner_r), "--owned-dir", str(self.workdir)]
        argv += ["--log-level", "warning", *self._flags]
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        self._log = open(self.workdir / "node.log", "wb")  # noqa: SIM115 - closed in stop()
        try:
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=self._log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    pass_fds=(owner_r,),
                    # Not in our process group: a signal to the group (a terminal's Ctrl-C,
                    # Jupyter's interrupt and shutdown) is for us; the node follows this
                    # process, through stop() or the pipe above.
                    start_new_session=True,
                )
            finally:
                os.close(owner_r)
            _LIVE.add(self)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _http(self, timeout: float = 2.0) -> httpx.Client:
        # Health checks go to the node itself: never through an HTTP proxy from the env.
        if self.socket_path is not None:
            transport = httpx.HTTPTransport(uds=str(self.socket_path))
            return httpx.Client(base_url=self.base_url, transport=transport, timeout=timeout)
        headers = bearer_headers(self.token, environ={})
        return httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=headers, trust_env=False
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        with self._http() as http:
            while True:
                proc = self._proc
                if proc is None or proc.poll() is not None:
                    code = proc.returncode if proc is not None else None
                    raise CollimateError(
                        f"the node exited ({code}) during start-up: {self._tail()}"
                    )
                with contextlib.suppress(httpx.TransportError):
                    if http.get("/v1/health").status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise CollimateError(
                        f"the node did not answer /v1/health within {self.startup_timeout}s: "
                        f"{self._tail()}"
                    )
                time.sleep(0.05)

    def _tail(self, limit: int = 2000) -> str:
        path = self.log_path
        if path is None or not path.exists():
            return "(no log)"
        return path.read_bytes()[-limit:].decode("utf-8", errors="replace").strip() or "(empty log)"

    def stop(self, timeout: float | None = None) -> int | None:
        """Drain and stop the node (SIGTERM, then SIGKILL), remove its folder. Idempotent.

        Returns the node's exit status (``None`` if it never started).
        """
        wait = timeout if timeout is not None else self._drain_timeout + 10.0
        code: int | None = None
        with contextlib.ExitStack() as stack:
            stack.callback(self._remove_workdir)
            stack.callback(self._close_log)
            stack.callback(self._close_clients)
            stack.callback(self._close_owner_pipe)
            proc, self._proc = self._proc, None
            _LIVE.discard(self)
            if proc is not None:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                try:
                    code = proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    code = proc.wait()
        return code

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the node to exit by itself (e.g. after a SIGTERM); its exit status.

        Raises ``subprocess.TimeoutExpired`` if it is still running after ``timeout``.
        """
        if self._proc is None:
            raise CollimateError("LocalNode is not running")
        return self._proc.wait(timeout=timeout)

    def _close_clients(self) -> None:
        clients, self._clients = self._clients, []
        for client in clients:
            close = getattr(client, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()

    def _close_owner_pipe(self) -> None:
        owner_w, self._owner_w = self._owner_w, None
        if owner_w is not None:
            os.close(owner_w)

    def _close_log(self) -> None:
        log, self._log = self._log, None
        if log is not None:
            log.close()

    def _remove_workdir(self) -> None:
        workdir, self.workdir = self.workdir, None
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)

    def __enter__(self) -> LocalNode:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- clients -----------------------------------------------------------

    def client(self, **kwargs: Any) -> Any:
        """A ``collimate_rl.wire.CollimateClient`` connected to this node (closed on stop)."""
        if self._proc is None:
            raise CollimateError("LocalNode is not running; use it as a context manager")
        if self.socket_path is not None:
            client = CollimateClient(unix_socket=str(self.socket_path), **kwargs)
        else:
            client = CollimateClient(base_url=self.base_url, **{"token": self.token, **kwargs})
        self._clients.append(client)
        return client

    def http(self, timeout: float = 120.0) -> httpx.Client:
        """A raw ``httpx.Client`` bound to this node (the caller closes it)."""
        return self._http(timeout)
