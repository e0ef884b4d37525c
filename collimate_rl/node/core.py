"""The node's state and its operations, independent of HTTP routing.

:class:`Node` ties a :class:`~collimate_rl.node.runtime.base.Runtime` to the
session registry, the admission gate and the drain state. The routers in
:mod:`collimate_rl.node.app` only translate HTTP to these calls.

>>> NodeConfig().max_inflight >= 1
True
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from collimate_rl._version import __version__
from collimate_rl.node.admission import Admission, AtCapacity
from collimate_rl.node.egress.policy import OPEN, EgressPolicy
from collimate_rl.node.egress.settings import EgressSettings
from collimate_rl.node.errors import NodeError, one_line
from collimate_rl.node.image_templates import (
    ImageSettings,
    NodeImages,
    image_error,
    image_root,
    image_service,
    image_setup,
)
from collimate_rl.node.metrics import INFRA_CODES, ExecTally, NodeMetrics, session_counts
from collimate_rl.node.models import (
    BakeRequest,
    BatchExecItem,
    CreateSessionRequest,
    ExecRequest,
)
from collimate_rl.node.request_ids import REQUEST_ID
from collimate_rl.node.runtime.base import (
    ExecOutcome,
    ExecSpec,
    Runtime,
    RuntimeError_,
    ServiceSpec,
    SessionLost,
    TemplateSpec,
)
from collimate_rl.node.runtime.workers import grade_of
from collimate_rl.node.sessions import SessionRecord, SessionRegistry

__all__ = ["Node", "NodeConfig", "NodeState", "build_exec_spec", "choose_egress"]

logger = logging.getLogger("collimate_rl.node")


def _default_inflight() -> int:
    # Execs often wait (timeouts, sleeps, I/O) rather than compute, so admit a few
    # per core: the kernel time-slices CPU-bound ones, and a hanging rollout does not
    # hold up the rest of its GRPO group.
    return 4 * max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class NodeConfig:
    """Tunables of one node (the ``serve`` flags).

    Attributes:
        max_inflight: execs running at once.
        queue: execs allowed to wait for a slot; past that, ``at_capacity``.
        max_sessions: live sessions allowed; past that, ``at_capacity``.
        session_ttl: idle seconds before a session is reaped (``None``: never).
        pool_size: warm sessions kept ready per template.
        drain_timeout: seconds a drain waits for in-flight work.
        max_body_bytes: largest request body accepted (else 413).
        egress: how the egress proxy resolves names and what counts as the
            internet (see :class:`~collimate_rl.node.egress.settings.EgressSettings`).
        images: the image store and registries (see
            :class:`~collimate_rl.node.image_templates.ImageSettings`).
    """

    max_inflight: int = _default_inflight()
    queue: int = 256
    max_sessions: int = 4096
    session_ttl: float | None = 600.0
    pool_size: int = 2
    drain_timeout: float = 30.0
    max_body_bytes: int = 64 << 20
    egress: EgressSettings = field(default_factory=EgressSettings)
    images: ImageSettings = field(default_factory=ImageSettings)


class NodeState(str, enum.Enum):
    """Where a node is in its life."""

    NEW = "new"
    RUNNING = "running"
    DRAINING = "draining"
    CLOSED = "closed"


def choose_egress(
    template_id: str,
    requested: EgressPolicy | None,
    *,
    networked: bool,
    default: EgressPolicy | None = None,
    hint: str = "",
) -> EgressPolicy | None:
    """The policy a new session of ``template_id`` runs under; ``None``: it has no network.

    A per-call policy wins over the template's default, which wins over
    ``open``. On a template without network only ``none`` (or nothing) is
    accepted: anything else is the contract's 400 "template is vsock-only".

    >>> choose_egress("python3-net", None, networked=True).mode
    'open'
    >>> choose_egress("python3", EgressPolicy(mode="none"), networked=False) is None
    True
    """
    if not networked:
        if requested is None or requested.mode == "none":
            return None
        raise NodeError(
            "bad_request",
            f"template is vsock-only: {template_id!r} has no network{hint}; "
            'omit egress or send {"mode": "none"}',
        )
    return requested or default or OPEN


def build_exec_spec(req: ExecRequest) -> ExecSpec:
    """Translate a validated request into the runtime's :class:`ExecSpec`.

    Precedence is command > commands > code; a fresh seed is drawn when none
    was given.

    >>> spec = build_exec_spec(ExecRequest(command="true", code="print(1)"))
    >>> spec.command, spec.code, len(spec.seed)
    ('true', None, 64)
    """
    files = tuple((f.path, f.content.encode("utf-8")) for f in req.files or ())
    seed = req.seed or secrets.token_hex(32)
    common: dict[str, Any] = {
        "seed": seed,
        "timeout_seconds": float(req.timeout_seconds),
        "files": files,
    }
    if req.command is not None:
        return ExecSpec(command=req.command, **common)
    if req.commands is not None:
        return ExecSpec(commands=tuple(tuple(argv) for argv in req.commands), **common)
    if req.code is not None:
        return ExecSpec(code=req.code, **common)
    raise NodeError("bad_request", "one of command/code/commands is required")


def bake_service(
    req: BakeRequest,
) -> tuple[list[str], ServiceSpec | None, tuple[tuple[str, str], ...]]:
    """Split a bake into setup commands, the service and the template env.

    With ``ready.ports``, ``ready.cmd`` is the service; otherwise it is one more
    setup command (the gateway runs it once at bake, as ``WARM_CMD``).

    >>> req = BakeRequest.model_validate({"template_id": "t", "setup": ["true"],
    ...     "ready": {"cmd": "srv", "ports": [8000], "http": "/health"}})
    >>> setup, service, env = bake_service(req)
    >>> setup, service.cmd, service.ports, service.http_timeout_s
    (['true'], 'srv', (8000,), 60.0)
    """
    ready = req.ready
    setup = list(req.setup)
    # a networked twin of the base's files needs nothing else
    networked_only = req.network or (req.egress is not None and req.egress.mode != "none")
    if ready is None:
        if not setup and not networked_only:
            raise NodeError(
                "bad_request", "setup must list at least one command (or give ready or network)"
            )
        return setup, None, ()
    env = tuple(sorted(ready.env.items()))
    if ready.http and not ready.ports:
        raise NodeError("bad_request", "ready.http needs ready.ports (the port it is served on)")
    if not ready.ports:
        if ready.cmd:
            setup.append(ready.cmd)
        if not setup and not env and not networked_only:
            raise NodeError(
                "bad_request", "nothing to bake: give setup, ready.cmd, ready.env or network"
            )
        return setup, None, env
    if not ready.cmd:
        raise NodeError("bad_request", "ready.ports needs ready.cmd (the server to start)")
    service = ServiceSpec(
        cmd=ready.cmd,
        ports=tuple(dict.fromkeys(ready.ports)),
        http=ready.http,
        http_timeout_s=float(ready.http_timeout_s or 60.0),
    )
    return setup, service, env


def _ms_since(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


def _exec_body(
    outcome: ExecOutcome, seed: str, *, fork_ms: float, start: float, request_id: str
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "stdout": outcome.output.decode("utf-8", errors="replace"),
        "stderr": "",
        "exit_code": outcome.exit_code,
        "fork_time_ms": fork_ms,
        "exec_time_ms": round(outcome.exec_time_ms, 3),
        "total_time_ms": _ms_since(start),
        "seed": seed,
        "seed_ack": outcome.seed_ack,
        "id": request_id,
    }
    if outcome.truncated:
        body["truncated"] = True
    return body


class Node:
    """One sandbox node: runtime, sessions, admission and drain state.

    Args:
        runtime: the sandbox runtime; :meth:`start` starts it, :meth:`close`
            closes it.
        config: the node's tunables.
    """

    def __init__(self, runtime: Runtime, config: NodeConfig | None = None) -> None:
        self.runtime = runtime
        self.config = config or NodeConfig()
        #: this node's Prometheus metrics (``GET /metrics``; docs/operations.md)
        self.metrics = NodeMetrics(self)
        self.sessions = SessionRegistry(
            runtime,
            max_sessions=self.config.max_sessions,
            ttl_seconds=self.config.session_ttl,
            pool_size=self.config.pool_size,
            egress=self.config.egress,
            on_egress=self.metrics.egress_decision,
        )
        #: baked templates' default egress policies (the gateway's EGRESS knob)
        self._egress_defaults: dict[str, EgressPolicy] = {}
        #: the image store, of which this node is one holder of records of use
        self.images = NodeImages(self.config.images, self.metrics)
        #: image template id -> the reference its image was pulled as (a bake over it uses it)
        self._image_templates: dict[str, str] = {}
        self.admission = Admission(self.config.max_inflight, self.config.queue)
        self.state = NodeState.NEW
        self._busy = 0

    # -- lifecycle -------------------------------------------------------

    async def start(self) -> None:
        """Start the runtime, the reaper and the warm pool."""
        await self.runtime.start()
        await self.sessions.start()
        try:  # a killed node's records of use would keep its images from prune
            gone = await asyncio.to_thread(self.images.release_gone)
        except Exception as exc:  # an unreadable store: its images' requests will say so
            logger.warning("image store: could not release stopped nodes' records: %s", exc)
        else:
            if gone:
                logger.info("image store: released the records of %d stopped node(s)", len(gone))
        self.state = NodeState.RUNNING

    async def close(self) -> None:
        """Destroy every session and close the runtime. Idempotent."""
        if self.state is NodeState.CLOSED:
            return
        self.state = NodeState.CLOSED
        try:
            await self.sessions.close()
        finally:
            try:
                await self.runtime.close()
            finally:
                with contextlib.suppress(Exception):  # prune may take its images now
                    await asyncio.to_thread(self.images.close)

    def begin_drain(self) -> None:
        """Refuse new work from now on; in-flight work carries on."""
        if self.state is NodeState.RUNNING or self.state is NodeState.NEW:
            logger.info("draining: refusing new work")
            self.state = NodeState.DRAINING

    @property
    def idle(self) -> bool:
        """Nothing running, queued, creating or forking."""
        return self._busy == 0 and self.admission.running == 0 and self.admission.queued == 0

    async def wait_drained(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) for in-flight work; ``True`` if it all finished."""
        deadline = time.monotonic() + timeout
        while not self.idle:
            if time.monotonic() >= deadline:
                logger.warning("drain timeout after %.1fs; stopping with work in flight", timeout)
                return False
            await asyncio.sleep(0.05)
        return True

    def _refuse_if_draining(self) -> None:
        if self.state is not NodeState.RUNNING:
            raise NodeError("draining", "node is draining; send new work to another node")

    @contextlib.asynccontextmanager
    async def _work(self, op: str) -> AsyncIterator[None]:
        try:
            self._refuse_if_draining()
            self._busy += 1
            try:
                yield
            finally:
                self._busy -= 1
        except NodeError as exc:
            self.metrics.error(op, exc.code)
            raise

    @contextlib.asynccontextmanager
    async def _admitted(self, *, batched: bool = False) -> AsyncIterator[None]:
        # A batch's items had their places reserved with the batch (see exec_batch).
        self._refuse_if_draining()
        try:
            if not batched:
                self.admission.check()  # no await between this check and the slot's own
        except AtCapacity as exc:
            raise NodeError("at_capacity", str(exc)) from exc
        async with self.admission.slot(reserved=batched):
            yield

    # -- operations ------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """The ``/v1/health`` body."""
        isolation = getattr(self.runtime, "isolation", "unknown")
        return {
            "status": "ok" if self.state is NodeState.RUNNING else "draining",
            "sessions": len(self.sessions),
            "running": self.admission.running,
            "max_inflight": self.admission.max_inflight,
            "queued": self.admission.queued,
            "templates": list(self.runtime.templates()),
            "unavailable_templates": dict(getattr(self.runtime, "unavailable_templates", dict)()),
            "version": __version__,
            "isolation": str(getattr(isolation, "value", isolation)),
        }

    def metric_state(self) -> dict[str, Any]:
        """What the scrape-time gauges show (:mod:`collimate_rl.node.metrics`)."""
        isolation = getattr(self.runtime, "isolation", "unknown")
        pooled = {t: self.sessions.pooled(t) for t in self.runtime.templates()}
        return {
            "running": self.admission.running,
            "queued": self.admission.queued,
            "max_inflight": self.admission.max_inflight,
            "max_queue": self.admission.max_queue,
            "max_sessions": self.config.max_sessions,
            "draining": self.state is not NodeState.RUNNING,
            "sessions": session_counts(rec.template_id for rec in self.sessions.records()),
            "pooled": {t: n for t, n in pooled.items() if n},
            "version": __version__,
            "isolation": str(getattr(isolation, "value", isolation)),
        }

    def _networked(self, template_id: str) -> bool:
        spec_of = getattr(self.runtime, "template_spec", None)
        try:
            return spec_of is not None and bool(spec_of(template_id).network)
        except (KeyError, AttributeError):
            return False

    def egress_for(self, template_id: str, requested: EgressPolicy | None) -> EgressPolicy | None:
        """The policy a new session of ``template_id`` gets (see :func:`choose_egress`)."""
        self.sessions.check_template(template_id)
        isolation = str(getattr(getattr(self.runtime, "isolation", None), "value", ""))
        if isolation == "none":  # nothing is confined: a policy could not be enforced
            return choose_egress(
                template_id,
                requested,
                networked=False,
                hint=" a policy can hold (this node runs isolation=none, which confines "
                "nothing; egress policies need isolation=bwrap)",
            )
        twin = f"{template_id}-net"
        hint = f" (its networked twin is {twin!r})" if twin in self.runtime.templates() else ""
        return choose_egress(
            template_id,
            requested,
            networked=self._networked(template_id),
            default=self._egress_defaults.get(template_id),
            hint=hint,
        )

    async def create_session(self, req: CreateSessionRequest) -> dict[str, Any]:
        """Create a session (a warm-pool hit when one is ready)."""
        async with self._work("create"):
            egress = self.egress_for(req.template_id, req.egress)
            rec, fork_ms, create_ms = await self.sessions.create(req.template_id, egress=egress)
        self.metrics.created(create_ms / 1e3, pool_hit=fork_ms == 0.0)
        body: dict[str, Any] = {
            "session_id": rec.session_id,
            "template_id": rec.template_id,
            "fork_time_ms": fork_ms,
            "create_time_ms": create_ms,
        }
        endpoints = getattr(rec.handle, "endpoints", None)
        if endpoints:
            body["endpoints"] = dict(endpoints)
        return body

    async def bake(self, req: BakeRequest) -> dict[str, Any]:
        """Run ``req.setup`` over ``req.base`` and register the result as a new template
        (or, with ``req.image``, make that image a template)."""
        if req.image is not None:
            return await self._bake_image(req, req.image)
        async with self._work("bake"):
            if req.template_id in self.runtime.templates():
                raise NodeError("template_exists", f"template {req.template_id!r} already exists")
            self.sessions.check_template(req.base)
            setup, service, env = bake_service(req)
            default = self._baked_egress(req)
            start = time.perf_counter()
            image_ref = self._image_templates.get(req.base)  # over an image template's root
            if image_ref is not None:
                await asyncio.to_thread(self.images.use, image_ref, req.template_id)
            try:
                await self.runtime.bake(
                    req.template_id,
                    req.base,
                    setup,
                    network=req.network,
                    service=service,
                    env=env,
                )
            except BaseException as exc:
                if image_ref is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.to_thread(self.images.release, req.template_id)
                if isinstance(exc, RuntimeError_):
                    raise NodeError("bake_failed", str(exc)) from exc
                if isinstance(exc, ValueError):
                    raise NodeError("bad_request", one_line(exc)) from exc
                raise
            if image_ref is not None:
                self._image_templates[req.template_id] = image_ref
            if default is not None:
                self._egress_defaults[req.template_id] = default
        return {
            "template_id": req.template_id,
            "base": req.base,
            "bake_time_ms": round((time.perf_counter() - start) * 1e3, 3),
            "templates": sorted(self.runtime.templates()),
        }

    async def _bake_image(self, req: BakeRequest, ref: str) -> dict[str, Any]:
        """Pull ``ref`` into the image store and register it as the template ``req.template_id``
        (after its setup commands, run once in the image's root: ``Runtime.bake_image``)."""
        async with self._work("bake"):
            if req.template_id in self.runtime.templates():
                raise NodeError("template_exists", f"template {req.template_id!r} already exists")
            default = self._baked_egress(req)
            start = time.perf_counter()
            record = await self.images.pull(ref)
            root = image_root(record)
            service, env = image_service(req.ready, root)
            setup = image_setup(req.setup, req.ready)
            spec = TemplateSpec(
                req.template_id, image=root, service=service, env=env, network=req.network
            )
            # in use from now on: a prune while the setup runs must keep the image's layers
            await asyncio.to_thread(self.images.use, record.ref, req.template_id)
            try:
                if setup:
                    await self.runtime.bake_image(spec, setup, network=req.network)
                else:
                    await self.runtime.add_template(spec)
            except BaseException as exc:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(self.images.release, req.template_id)
                if isinstance(exc, RuntimeError_):  # a failed command: its output's tail
                    raise NodeError("bake_failed", str(exc) if setup else one_line(exc)) from exc
                if isinstance(exc, ValueError):  # no /bin/sh, its User is not in it, a bad id
                    raise image_error(ref, exc) from exc
                raise
            self._image_templates[req.template_id] = record.ref
            if default is not None:
                self._egress_defaults[req.template_id] = default
        return {
            "template_id": req.template_id,
            "base": record.ref,
            "image": record.ref,
            "bake_time_ms": round((time.perf_counter() - start) * 1e3, 3),
            "templates": sorted(self.runtime.templates()),
        }

    def _baked_egress(self, req: BakeRequest) -> EgressPolicy | None:
        """A bake's default policy: its own, else its base's; checked before anything runs."""
        if req.egress is None:
            return self._egress_defaults.get(req.base)
        if req.egress.mode == "none":
            return req.egress
        isolation = str(getattr(getattr(self.runtime, "isolation", None), "value", ""))
        if isolation == "none" or not (req.network or self._networked(req.base)):
            raise NodeError(
                "bad_request",
                f"template is vsock-only: {req.template_id!r} would have no network; bake it "
                "with network (Ready(network=True), collimate bake --network) over isolation=bwrap",
            )
        return req.egress

    async def fork(self, session_id: str, count: int) -> dict[str, Any]:
        """Fork a quiescent session into ``count`` children."""
        async with self._work("fork"):
            children, fork_ms = await self.sessions.fork(session_id, count)
        self.metrics.forked_sessions(len(children), fork_ms / 1e3)
        return {
            "parent": session_id,
            "children": [
                {
                    "id": child.session_id,
                    "session_id": child.session_id,
                    "template_id": child.template_id,
                    "fork_time_ms": fork_ms,
                    "create_time_ms": fork_ms,
                }
                for child in children
            ],
        }

    async def exec_in_session(
        self, session_id: str, req: ExecRequest, *, batched: bool = False
    ) -> dict[str, Any]:
        """Run one exec in an existing session."""
        start = time.perf_counter()
        request_id = f"req_{secrets.token_hex(8)}"
        spec = build_exec_spec(req)
        with ExecTally(self.metrics, "session", grade=grade_of(spec) is not None) as tally:
            self._refuse_if_draining()
            self.sessions.get(session_id)  # 404 before queueing
            async with self._admitted(batched=batched), self.sessions.using(session_id) as rec:
                outcome = await self._run(rec, spec)
            tally.ran(outcome.exit_code, outcome.timed_out)
        return _exec_body(outcome, spec.seed, fork_ms=0.0, start=start, request_id=request_id)

    async def exec_once(self, req: ExecRequest, *, batched: bool = False) -> dict[str, Any]:
        """Create a session, exec once, and always delete it."""
        start = time.perf_counter()
        request_id = f"req_{secrets.token_hex(8)}"
        if req.template_id is None:
            self._refuse_if_draining()
            raise NodeError("bad_request", "template_id is required for a one-shot exec")
        spec = build_exec_spec(req)
        with ExecTally(self.metrics, "oneshot", grade=grade_of(spec) is not None) as tally:
            self._refuse_if_draining()
            egress = self.egress_for(req.template_id, req.egress)
            async with self._admitted(batched=batched):
                rec, fork_ms, _ = await self.sessions.create(req.template_id, egress=egress)
                try:
                    async with self.sessions.using(rec.session_id):
                        outcome = await self._run(rec, spec)
                finally:
                    await self.sessions.delete(rec.session_id)
            tally.ran(outcome.exit_code, outcome.timed_out)
        return _exec_body(outcome, spec.seed, fork_ms=fork_ms, start=start, request_id=request_id)

    async def exec_batch(self, items: list[BatchExecItem]) -> dict[str, Any]:
        """Run many execs concurrently; each item's result or error, in order.

        Admission reserves a place per item, in order, as far as places are
        free: 503 ``at_capacity`` (or ``draining``) for the whole batch when
        none is, before anything ran; otherwise the items past the free places
        get ``at_capacity`` as their own error (they did not run; safe to
        resend). Admitted items wait for running slots like any exec. An item's
        failure (an unknown session, a lost sandbox) is that item's
        ``{"error", "error_code", "status"}``, never the batch's.
        """
        try:
            self._refuse_if_draining()
            admitted = self.admission.reserve(len(items))
            if not admitted:
                try:
                    self.admission.check()
                except AtCapacity as exc:
                    raise NodeError("at_capacity", str(exc)) from exc
        except NodeError as exc:  # nothing ran: each item was refused
            for item in items:
                kind = "session" if item.session_id is not None else "oneshot"
                self.metrics.exec_failed(kind, exc.code, grade=False)
            raise

        async def one(index: int, item: BatchExecItem) -> dict[str, Any]:
            try:
                if index >= admitted:
                    kind = "session" if item.session_id is not None else "oneshot"
                    self.metrics.exec_failed(kind, "at_capacity", grade=False)
                    raise NodeError("at_capacity", "node at capacity: this batch item was shed")
                if item.session_id is not None:
                    return await self.exec_in_session(item.session_id, item, batched=True)
                return await self.exec_once(item, batched=True)
            except NodeError as exc:
                # as a single request's access line would: its line names the request id
                level = logging.WARNING if exc.code in INFRA_CODES else logging.INFO
                logger.log(level, "batch item %d: %s: %s", index, exc.code, exc.message)
                error = {"error": exc.message, "error_code": exc.code, "status": exc.status}
                request_id = REQUEST_ID.get()
                if request_id is not None:  # the SDK's error for this item carries it
                    error["request_id"] = request_id
                return error

        try:
            results = await asyncio.gather(*(one(i, item) for i, item in enumerate(items)))
        finally:
            if admitted:
                self.admission.release(admitted)
        return {"results": list(results)}

    async def delete_many(self, session_ids: list[str]) -> dict[str, Any]:
        """Delete sessions; which were deleted and which did not exist."""
        deleted = await self.sessions.delete_many(session_ids)
        return {"deleted": deleted, "missing": [s for s in session_ids if s not in deleted]}

    async def _run(self, rec: SessionRecord, spec: ExecSpec) -> ExecOutcome:
        try:
            return await rec.handle.exec(spec)
        except SessionLost as exc:
            await self.sessions.discard(rec.session_id)
            raise NodeError(
                "session_gone",
                f"session {rec.session_id!r} is gone (deleted, reaped or its sandbox died)",
            ) from exc
        except RuntimeError_ as exc:
            raise NodeError("internal_error", f"exec failed: {one_line(exc)}") from exc
        except ValueError as exc:  # the runtime refused the spec (e.g. a file path)
            raise NodeError("bad_request", one_line(exc, limit=300)) from exc
