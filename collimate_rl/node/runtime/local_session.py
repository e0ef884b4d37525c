"""A session handle on the host: a process tree (or, for a light session, a
record) forked by its template's master; exec, fork, service ports and close.

The session knows its template host only through :class:`SessionHost` (the
host module builds sessions, so it imports this one, not the reverse).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ._warm import HARNESS_MIN_PYTHON, full_program_for
from .base import (
    ExecOutcome,
    ExecSpec,
    ImageWithoutPython,
    RuntimeError_,
    ServiceNotReady,
    ServiceSpec,
    SessionBusy,
    SessionHandle,
    SessionLost,
    TemplateSpec,
)
from .bridge import Bridge, ServiceFailed, read_bounded, wait_http
from .image_template import ImageFacts
from .unix_rpc import unix_call
from .workers import WorkerPool, exec_header, grade_of, grade_request

__all__ = ["MAX_FORK_DEPTH", "LocalSession", "SessionHost", "close_sessions"]

#: Nested user namespaces are limited to 32 levels by the kernel: the host,
#: the template container and the first session take three; keep a margin.
MAX_FORK_DEPTH = 24


class SessionHost(Protocol):
    """What a session needs of its template's host (``template_host.TemplateHost``)."""

    spec: TemplateSpec
    sock_dir: Path
    workers: WorkerPool
    image_facts: ImageFacts | None

    @property
    def running(self) -> bool: ...

    async def new_sessions(
        self,
        header: dict[str, Any],
        ids: Sequence[str],
        depth: int,
        *,
        template_id: str | None = None,
        networked: bool = False,
        light_parent: bool = False,
    ) -> list[LocalSession]: ...

    async def kill(self, keys: Sequence[str]) -> None: ...


class LocalSession:
    """A session: a process tree forked by its template's master."""

    def __init__(
        self,
        host: SessionHost,
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
            return await unix_call(self._sock, header, payload, timeout=timeout)
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
        facts = self._host.image_facts
        code_only = spec.command is None and spec.commands is None
        if facts is not None and not facts.has_python and code_only:
            image = self._host.spec.image
            raise ImageWithoutPython(
                f"template {self._host.spec.template_id!r}: its image "
                f"{image.ref if image is not None else ''} has no python3 on its PATH, so it "
                "cannot run code execs (send a command instead, or bake the template from an "
                "image with python3)"
            )
        if facts is not None:
            self._check_image_python(spec, facts)
        if self._light:
            reply, body = await self._exec_light(spec)
        else:
            if facts is not None:
                spec = self._for_image(spec)
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

    def _check_image_python(self, spec: ExecSpec, facts: ImageFacts) -> None:
        """A grade needs an image ``python3`` the harness runs in (``ImageWithoutPython``)."""
        if grade_of(spec) is None:
            return
        version = facts.python_version
        if version is not None and version < HARNESS_MIN_PYTHON:
            raise ImageWithoutPython(
                f"template {self._host.spec.template_id!r}: its image's python3 is "
                f"{version[0]}.{version[1]}; Python grading needs "
                f"{'.'.join(map(str, HARNESS_MIN_PYTHON))} or newer in the image (commands "
                "and code execs still run)"
            )

    @staticmethod
    def _for_image(spec: ExecSpec) -> ExecSpec:
        """A grade (the warm stub) as an exec of an image template's session: the full
        grading program for the image's ``python3``, where no harness is warm (the image
        zygote's jobs are warm, ``_sandbox/image_zygote.py``: the worker tries one first)."""
        if grade_of(spec) is None:
            return spec
        (path, _data), *_ = spec.files
        return dataclasses.replace(spec, code=full_program_for(path))

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
                if self._host.image_facts is None:
                    header, payload = grade_request(header, payload)  # (blocks compiled here)
                reply, body = await workers.request(header, payload, timeout)
            if reply.get("fallback"):  # not a grade a worker runs: an exec in a box
                if self._host.image_facts is not None:
                    spec = self._for_image(spec)
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
        if self._light:  # no server socket, service or relay: nothing on disk
            return
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
    by_host: dict[int, tuple[SessionHost, list[LocalSession]]] = {}
    for sess in sessions:
        if not sess._closed:
            sess._closed = True
            by_host.setdefault(id(sess._host), (sess._host, []))[1].append(sess)
    for host, group in by_host.values():
        await asyncio.gather(*(sess.close_bridges() for sess in group))
        await host.kill([sess._key for sess in group])
        for sess in group:
            sess._forget_files()
