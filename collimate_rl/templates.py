"""Templates and environments: bake on the gateway, declare a width, release it.

A *template* is what sandboxes fork from. On the managed gateway you bake one
from an image (:meth:`Template.bake`, with :class:`Ready` saying when a warm
clone is ready), watch it converge (:meth:`TemplateHandle.wait`) and declare
the warm width you expect to use. :func:`environment` (what
``client.env(ref, width=...)`` calls) picks the right path for a reference
and returns an :class:`Env`: a context manager that releases a declared width
on exit and hands out :class:`~collimate_rl.sandbox.Sandbox` handles.

On the local node (or the plain daemon) templates are built in: an
:class:`Env` on a template id is a plain handle and ``width`` is only a hint.
Baking there needs a node bake endpoint that does not exist yet, so asking for
one raises :class:`~collimate_rl.errors.CollimateUsageError` naming the
gateway.

>>> Ready(cmd="python3 -c 'import numpy'", ports=[8080]).to_wire()
{'cmd': "python3 -c 'import numpy'", 'ports': [8080]}
>>> TemplateStatus.from_response({"id": "t1", "phase": "Live", "warm": 3,
...     "frozen": 1, "converge_state": "converged"}).total
4
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Final, TypeVar

from collimate_rl.errors import (
    CollimateError,
    CollimateNotFoundError,
    CollimateUsageError,
    GatewayError,
)
from collimate_rl.sandbox import AsyncSandbox, Sandbox
from collimate_rl.sandbox._core import ClientCall, Op, Sleep, adrive, drive, field_of, to_dict

__all__ = [
    "PHASE_RANK",
    "AsyncEnv",
    "AsyncTemplate",
    "AsyncTemplateHandle",
    "Env",
    "Ready",
    "Template",
    "TemplateBakeFailed",
    "TemplateHandle",
    "TemplateStatus",
    "environment",
    "environment_async",
]

#: How far along a bake is; anything unknown (``Failed`` included) ranks 0.
PHASE_RANK: Final[Mapping[str, int]] = {
    "Pending": 0,
    "Converting": 1,
    "Distributing": 2,
    "Live": 3,
}


H = TypeVar("H", "TemplateHandle", "AsyncTemplateHandle")


def _is_gateway(client: Any) -> bool:
    return callable(getattr(client, "expect_width", None)) and callable(
        getattr(client, "create_template", None)
    )


def _int(value: Any) -> int:
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class Ready:
    """When a warm clone of a baked template counts as ready, and what it exposes.

    Attributes:
        cmd: a command that must succeed (``WARM_CMD``).
        http: a URL path polled until it answers (wins over ``cmd`` server-side).
        http_timeout_s: how long to poll ``http``.
        ports: guest ports to expose (imply a NIC).
        env: extra environment baked in.
        network: give the template a NIC (Pro/Ent).

    >>> Ready().to_wire() is None
    True
    >>> Ready(http="/healthz", network=True).to_wire()
    {'http': '/healthz', 'network': True}
    """

    cmd: str = ""
    http: str = ""
    http_timeout_s: int = 0
    ports: Sequence[int] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    network: bool = False

    def to_wire(self) -> dict[str, Any] | None:
        """The ReadySpec dict with empty fields omitted, or ``None`` if nothing is set."""
        spec: dict[str, Any] = {}
        if self.cmd:
            spec["cmd"] = self.cmd
        if self.http:
            spec["http"] = self.http
        if self.http_timeout_s:
            spec["http_timeout_s"] = int(self.http_timeout_s)
        if self.ports:
            spec["ports"] = [int(p) for p in self.ports]
        if self.env:
            spec["env"] = dict(self.env)
        if self.network:
            spec["network"] = True
        return spec or None

    def __bool__(self) -> bool:
        return self.to_wire() is not None


@dataclass(frozen=True)
class TemplateStatus:
    """A template's bake and pool status (``GET /v1/templates/{id}``).

    >>> s = TemplateStatus.from_response({"id": "t", "phase": "Failed", "build_fails": 2})
    >>> s.failed, s.converged, s.phase_rank, s.converge_state
    (True, False, 0, 'converging')
    """

    id: str
    name: str = ""
    image: str = ""
    phase: str = "Pending"
    declared: int = 0
    warm: int = 0
    frozen: int = 0
    per_node: Sequence[Mapping[str, Any]] = ()
    converge_state: str = "converging"
    bake_mode: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    error: str = ""
    build_fails: int = 0

    @property
    def total(self) -> int:
        """Warm plus frozen spares."""
        return self.warm + self.frozen

    @property
    def converged(self) -> bool:
        """Whether the fleet holds the declared width."""
        return self.converge_state == "converged"

    @property
    def failed(self) -> bool:
        """Whether the bake failed (phase ``Failed``)."""
        return self.phase == "Failed"

    @property
    def phase_rank(self) -> int:
        """``Pending`` 0, ``Converting`` 1, ``Distributing`` 2, ``Live`` 3, else 0."""
        return PHASE_RANK.get(self.phase, 0)

    @classmethod
    def from_response(cls, resp: Any) -> TemplateStatus:
        """Build from a TemplateStatusResponse; missing fields take their defaults."""
        per_node = field_of(resp, "per_node") or []
        return cls(
            id=str(field_of(resp, "id", "") or ""),
            name=str(field_of(resp, "name", "") or ""),
            image=str(field_of(resp, "image", "") or ""),
            phase=str(field_of(resp, "phase", "") or "Pending"),
            declared=_int(field_of(resp, "declared")),
            warm=_int(field_of(resp, "warm")),
            frozen=_int(field_of(resp, "frozen")),
            per_node=[dict(row) for row in per_node if isinstance(row, Mapping)],
            converge_state=str(field_of(resp, "converge_state", "") or "converging"),
            bake_mode=str(field_of(resp, "bake_mode", "") or ""),
            raw=to_dict(resp),
            error=str(field_of(resp, "error", "") or ""),
            build_fails=_int(field_of(resp, "build_fails")),
        )


class TemplateBakeFailed(GatewayError):
    """A bake failed (code ``bake_failed``, client-side).

    For compatibility ``.status`` is the :class:`TemplateStatus` (it shadows
    the HTTP status, which a client-side error does not have);
    ``.template_status`` is the same object under an unambiguous name.

    >>> err = TemplateBakeFailed("bake FAILED", TemplateStatus(id="t1", phase="Failed"))
    >>> err.error_code, err.status.phase, isinstance(err, GatewayError)
    ('bake_failed', 'Failed', True)
    """

    def __init__(self, message: str, status: TemplateStatus) -> None:
        super().__init__(message, status=None, error_code="bake_failed")
        self.status = status  # type: ignore[assignment]
        self.template_status = status


def _on_node(client: Any) -> bool:
    """A client of our local node (it bakes synchronously through ``bake_template``)."""
    return hasattr(client, "bake_template") and not _is_gateway(client)


def _no_node_bake(client: Any) -> CollimateUsageError:
    return CollimateUsageError(
        f"{type(client).__name__} cannot bake this: bakes need the gateway (GatewayClient) "
        "or a node's bake_template; on a node a bake runs over the base template given as "
        "`image` and needs Ready(cmd=...): a setup command, or with ports=[...] the server "
        "every session starts (http= waits for it; env= is baked in); or "
        "Ready(network=True) for a networked template"
    )


def _node_bake_op(
    client: Any, *, name: str, image: str, ready: Ready | None, width: int
) -> Op[_HandleInfo]:
    """The local node's bake (``POST /v1/templates``): synchronous, so live on return.

    The node reads the gateway's ReadySpec: with ``ports``, ``cmd`` is a server
    each session runs (the node bridges the ports: ``endpoints``); without,
    ``cmd`` is a setup command run once, like the gateway's ``WARM_CMD``.
    ``network`` makes the template networked (its sessions take ``egress=``
    policies, docs/egress.md) and gives the setup network.
    """
    if not hasattr(client, "bake_template") or ready is None or not (ready.cmd or ready.network):
        raise _no_node_bake(client)
    spec = ready.to_wire() or {}
    network = bool(spec.pop("network", False))
    if ready.ports:
        yield ClientCall(
            "bake_template", (name, []), {"base": image, "network": network, "ready": spec}
        )
    else:
        if ready.http:
            raise _no_node_bake(client)
        extra = {"ready": {"env": spec["env"]}} if "env" in spec else {}
        setup = [ready.cmd] if ready.cmd else []  # Ready(network=True) alone: a networked twin
        yield ClientCall(
            "bake_template", (name, setup), {"base": image, "network": network, **extra}
        )
    return _HandleInfo(
        id=name, name=name, image=image, declared=width, bake_mode="built", on_node=True
    )


def _not_gateway(template_id: str) -> CollimateError:
    return CollimateError(
        f"template status needs the gateway; {template_id!r} is a built-in node template"
    )


# ---------------------------------------------------------------- operations
# Written once as generators of client calls (see collimate_rl.sandbox._core);
# the sync classes drive them with blocking calls, the async twins await them.


@dataclass(frozen=True)
class _HandleInfo:
    id: str
    name: str = ""
    image: str = ""
    declared: int = 0
    bake_mode: str = ""
    on_node: bool = False  # a local-node template: baked synchronously, live once it exists


def _backfill(status: TemplateStatus, info: _HandleInfo) -> TemplateStatus:
    return replace(
        status,
        id=status.id or info.id,
        name=status.name or info.name,
        image=status.image or info.image,
        declared=status.declared or info.declared,
        bake_mode=status.bake_mode or info.bake_mode,
    )


def _status_op(info: _HandleInfo) -> Op[TemplateStatus]:
    if info.on_node:
        known = yield ClientCall("templates", ())
        live = info.id in list(known)
        return TemplateStatus(
            id=info.id,
            name=info.name or info.id,
            image=info.image,
            phase="Live" if live else "Failed",
            declared=info.declared,
            converge_state="converged" if live else "converging",
            bake_mode=info.bake_mode,
            error="" if live else f"template {info.id!r} is not on this node",
        )
    resp = yield ClientCall("get_template", (info.id,))
    return _backfill(TemplateStatus.from_response(resp), info)


def _wait_op(
    info: _HandleInfo,
    timeout: float,
    poll_interval: float,
    on_update: Callable[[TemplateStatus], None] | None,
    fail_fast: bool,
) -> Op[TemplateStatus]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = yield from _status_op(info)
        except GatewayError as exc:
            if exc.error_code != "not_found":
                raise
            gone = TemplateStatus(
                id=info.id, phase="Failed", error="template not found during bake"
            )
            raise TemplateBakeFailed(
                f"template {info.id} bake FAILED: template not found during bake", gone
            ) from exc
        if on_update is not None:
            on_update(status)
        if status.converged:
            return status
        if fail_fast and status.failed:
            detail = status.error or "no error detail from fleet"
            raise TemplateBakeFailed(
                f"template {info.id} bake FAILED after {max(status.build_fails, 1)} "
                f"attempt(s): {detail}",
                status,
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"template {info.id} did not converge to width {status.declared} within "
                f"{timeout}s (phase={status.phase}, warm={status.warm}, frozen={status.frozen})"
            )
        yield Sleep(min(poll_interval, remaining))


def _bake_op(
    client: Any, *, name: str, image: str, ready: Ready | None, width: int, cold_fraction: int
) -> Op[_HandleInfo]:
    if not _is_gateway(client):
        return (yield from _node_bake_op(client, name=name, image=image, ready=ready, width=width))
    resp = yield ClientCall(
        "create_template",
        (),
        {
            "name": name,
            "image": image,
            "ready": ready,
            "width": width,
            "cold_fraction": cold_fraction,
        },
    )
    tid = str(field_of(resp, "id", "") or "")
    if not tid:
        raise GatewayError(f"create_template for {name!r} returned no id: {resp!r}")
    return _HandleInfo(
        id=tid,
        name=str(field_of(resp, "name", "") or name),
        image=str(field_of(resp, "image", "") or image),
        declared=width,
        bake_mode=str(field_of(resp, "bake_mode", "") or ""),
    )


def _attach_op(template_id: str) -> Op[_HandleInfo]:
    status = yield from _status_op(_HandleInfo(template_id))
    return _HandleInfo(
        template_id,
        name=status.name,
        image=status.image,
        declared=status.declared,
        bake_mode=status.bake_mode,
    )


def _find_row(rows: Any, ref: str) -> Any:
    if isinstance(rows, Mapping):
        rows = field_of(rows, "images") or field_of(rows, "templates") or []
    items = list(rows or [])
    for key in ("id", "name"):
        for row in items:
            if field_of(row, key) == ref:
                return row
    return None


def _environment_op(
    client: Any,
    ref: str,
    *,
    width: int | None,
    name: str | None,
    ready: Ready | Mapping[str, Any] | None,
    env: Mapping[str, str] | None,
) -> Op[tuple[str, bool]]:
    """Resolve ``ref``; returns ``(template_id, releasable)`` (see :func:`environment`)."""
    has_overrides = bool(ready) or bool(env)
    if not _is_gateway(client):
        if has_overrides:
            raise _no_node_bake(client)
        if callable(getattr(client, "templates", None)):
            served = [str(t) for t in (yield ClientCall("templates"))]
            if ref not in served:
                raise CollimateNotFoundError(
                    f"this node has no template {ref!r}; it serves {served}. Pick one of "
                    "those, or connect to the gateway to bake your own",
                    status=404,
                    error_code="no_template",
                )
        return ref, False
    row = None
    if not (width is None and not has_overrides and name is not None):
        row = _find_row((yield ClientCall("images")), ref)
    public = row is not None and field_of(row, "visibility") == "public"
    row_id = str(field_of(row, "id", "") or "") if row is not None else ""
    if not has_overrides and (public or width is None):
        return row_id or ref, False
    if has_overrides and public:
        resp = yield ClientCall(
            "create_template",
            (),
            {
                "name": name or ref,
                "image": str(field_of(row, "image", "") or ref),
                "ready": ready,
                "env": env,
                "width": int(width) if width is not None else 1,
                "expected_width": int(width) if width is not None else None,
            },
        )
        tid = str(field_of(resp, "id", "") or "")
        if not tid:
            raise GatewayError(f"create_template for {ref!r} returned no id: {resp!r}")
        return tid, True
    tid = row_id or ref
    if width is not None:
        yield ClientCall("expect_width", (tid, int(width)))
    return tid, width is not None


def _release_op(template_id: str) -> Op[None]:
    try:
        yield ClientCall("release_template", (template_id,))
    except Exception:
        return  # best effort: idle decay (about an hour) is the safety net


# ------------------------------------------------------------------- handles


class _HandleBase:
    def __init__(
        self,
        client: Any,
        template_id: str,
        *,
        name: str = "",
        image: str = "",
        declared: int = 0,
        bake_mode: str = "",
    ) -> None:
        self.client = client
        self.id = template_id
        self.name = name
        self.image = image
        self.declared = declared
        self.bake_mode = bake_mode

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, declared={self.declared})"

    def _info(self) -> _HandleInfo:
        return _HandleInfo(
            self.id,
            self.name,
            self.image,
            self.declared,
            self.bake_mode,
            on_node=_on_node(self.client),
        )


class TemplateHandle(_HandleBase):
    """A baked (or baking) gateway template.

    Args:
        client: a gateway client.
        template_id: the template's id.
        name, image, declared, bake_mode: what the bake said; they fill in
            fields the server reports as empty or 0.

    >>> class Gateway:  # stands in for GatewayClient here
    ...     def get_template(self, template_id):
    ...         return {"id": template_id, "phase": "Live", "warm": 2,
    ...                 "converge_state": "converged"}
    >>> status = TemplateHandle(Gateway(), "tpl-1", declared=2).wait(timeout=5)
    >>> status.phase, status.declared, status.warm
    ('Live', 2, 2)
    """

    def status(self) -> TemplateStatus:
        """One ``GET /v1/templates/{id}``, backfilled from the handle."""
        return drive(_status_op(self._info()), self.client)

    def wait(
        self,
        timeout: float = 600.0,
        *,
        poll_interval: float = 1.0,
        on_update: Callable[[TemplateStatus], None] | None = None,
        fail_fast: bool = True,
    ) -> TemplateStatus:
        """Poll until the template has converged; return its last status.

        Polls at once, then every ``poll_interval`` seconds. Converged wins over
        a stale error.

        Raises:
            TemplateBakeFailed: (``fail_fast``) phase ``Failed`` while not
                converged, or the template vanished (404) during the wait.
            TimeoutError: not converged within ``timeout`` seconds.
        """
        op = _wait_op(self._info(), timeout, poll_interval, on_update, fail_fast)
        return drive(op, self.client)


class AsyncTemplateHandle(_HandleBase):
    """The async twin of :class:`TemplateHandle` (on ``AsyncGatewayClient``)."""

    async def status(self) -> TemplateStatus:
        """See :meth:`TemplateHandle.status`."""
        return await adrive(_status_op(self._info()), self.client)

    async def wait(
        self,
        timeout: float = 600.0,
        *,
        poll_interval: float = 1.0,
        on_update: Callable[[TemplateStatus], None] | None = None,
        fail_fast: bool = True,
    ) -> TemplateStatus:
        """See :meth:`TemplateHandle.wait`."""
        op = _wait_op(self._info(), timeout, poll_interval, on_update, fail_fast)
        return await adrive(op, self.client)


def _handle(cls: type[H], client: Any, info: _HandleInfo) -> H:
    return cls(
        client,
        info.id,
        name=info.name,
        image=info.image,
        declared=info.declared,
        bake_mode=info.bake_mode,
    )


class Template:
    """Bake, inspect and attach to gateway templates (a namespace of static methods).

    >>> class Gateway:  # stands in for GatewayClient here
    ...     def create_template(self, **kw):
    ...         return {"id": "tpl-9", "name": kw["name"], "image": kw["image"]}
    ...     def expect_width(self, template_id, width): ...
    >>> handle = Template.bake(Gateway(), name="np", image="python:3.12",
    ...                        ready=Ready(cmd="python3 -c 'import numpy'"), width=8)
    >>> handle.id, handle.declared
    ('tpl-9', 8)
    """

    @staticmethod
    def bake(
        client: Any,
        *,
        name: str,
        image: str,
        ready: Ready | None = None,
        width: int,
        cold_fraction: int = 0,
    ) -> TemplateHandle:
        """Bake ``image`` into a template with a warm pool of ``width``; don't wait.

        On a local node ``image`` is the base template and ``ready`` is read as
        described in docs/services.md (``cmd`` with ``ports``: a server each
        session runs; without: a setup command).

        Raises:
            CollimateUsageError: the client can bake neither way (or, on a node,
                ``ready`` has no ``cmd``).
        """
        op = _bake_op(
            client, name=name, image=image, ready=ready, width=width, cold_fraction=cold_fraction
        )
        return _handle(TemplateHandle, client, drive(op, client))

    @staticmethod
    def status(client: Any, template_id: str) -> TemplateStatus:
        """One status read of ``template_id``."""
        return drive(_status_op(_HandleInfo(template_id, on_node=_on_node(client))), client)

    @staticmethod
    def attach(client: Any, template_id: str) -> TemplateHandle:
        """A handle on an existing template (one GET, which also checks it exists)."""
        return _handle(TemplateHandle, client, drive(_attach_op(template_id), client))


class AsyncTemplate:
    """The async twin of :class:`Template` (on ``AsyncGatewayClient``)."""

    @staticmethod
    async def bake(
        client: Any,
        *,
        name: str,
        image: str,
        ready: Ready | None = None,
        width: int,
        cold_fraction: int = 0,
    ) -> AsyncTemplateHandle:
        """See :meth:`Template.bake`."""
        op = _bake_op(
            client, name=name, image=image, ready=ready, width=width, cold_fraction=cold_fraction
        )
        return _handle(AsyncTemplateHandle, client, await adrive(op, client))

    @staticmethod
    async def status(client: Any, template_id: str) -> TemplateStatus:
        """See :meth:`Template.status`."""
        return await adrive(_status_op(_HandleInfo(template_id, on_node=_on_node(client))), client)

    @staticmethod
    async def attach(client: Any, template_id: str) -> AsyncTemplateHandle:
        """See :meth:`Template.attach`."""
        return _handle(AsyncTemplateHandle, client, await adrive(_attach_op(template_id), client))


# ---------------------------------------------------------------------- envs


class _EnvBase:
    def __init__(
        self,
        client: Any,
        template_id: str,
        *,
        ref: str = "",
        releasable: bool = False,
        secret_refs: Sequence[str] | None = None,
    ) -> None:
        self.client = client
        self.id = template_id
        self.ref = ref or template_id
        self.releasable = releasable
        self.secret_refs = list(secret_refs) if secret_refs else None
        self._released = False

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(id={self.id!r}, ref={self.ref!r}, releasable={self.releasable})"
        )

    def _sandbox_kwargs(
        self,
        label: str | None,
        egress: Mapping[str, Any] | None,
        default_timeout: int,
        secret_refs: Sequence[str] | None,
        kwargs: Mapping[str, Any],
    ) -> dict[str, Any]:
        secrets = [*(self.secret_refs or ()), *(secret_refs or ())] or None
        return {
            "client": self.client,
            "egress": egress,
            "default_timeout": default_timeout,
            "label": label,
            "secret_refs": secrets,
            **kwargs,
        }

    def _check_gateway(self) -> None:
        if not _is_gateway(self.client):
            raise _not_gateway(self.id)

    def _take_release(self) -> bool:
        """Whether this call must release (at most once, only when declared)."""
        if not self.releasable or self._released:
            return False
        self._released = True
        return True


class Env(_EnvBase):
    """A template to run sandboxes from, and the warm width declared for it.

    Made by :func:`environment`. A context manager: on exit a width that was
    declared (``releasable``) is released, at most once, errors swallowed
    (idle decay is the safety net).

    Attributes:
        client: the client sandboxes are made with.
        id: the template id.
        ref: what the caller asked for.
        releasable: whether a width was declared (or a bake made) here.
        secret_refs: secrets given to every sandbox (gateway).

    >>> from collimate_rl.sandbox._shell import ShellClient
    >>> with environment(ShellClient(), "python3", width=8) as env:
    ...     with env.sandbox() as box:
    ...         box.exec(command="echo ok").stdout
    'ok\\n'
    """

    def sandbox(
        self,
        *,
        label: str | None = None,
        egress: Mapping[str, Any] | None = None,
        default_timeout: int = 60,
        secret_refs: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> Sandbox:
        """A :class:`~collimate_rl.sandbox.Sandbox` on this template (not started).

        Secrets are the env's plus ``secret_refs``; labels and secrets need the
        gateway. Other keyword arguments go to :class:`Sandbox`.
        """
        options = self._sandbox_kwargs(label, egress, default_timeout, secret_refs, kwargs)
        return Sandbox(self.id, **options)

    def status(self) -> TemplateStatus:
        """The template's status (gateway only)."""
        self._check_gateway()
        return Template.status(self.client, self.id)

    def wait(self, timeout: float = 600.0, **kwargs: Any) -> TemplateStatus:
        """Wait for the template to converge (see :meth:`TemplateHandle.wait`)."""
        self._check_gateway()
        return TemplateHandle(self.client, self.id).wait(timeout, **kwargs)

    def release(self) -> None:
        """Release the declared width: at most once, only if declared; never raises."""
        if self._take_release():
            drive(_release_op(self.id), self.client)

    def __enter__(self) -> Env:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class AsyncEnv(_EnvBase):
    """The async twin of :class:`Env` (made by :func:`environment_async`)."""

    def sandbox(
        self,
        *,
        label: str | None = None,
        egress: Mapping[str, Any] | None = None,
        default_timeout: int = 60,
        secret_refs: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> AsyncSandbox:
        """See :meth:`Env.sandbox`; returns an (unstarted) :class:`AsyncSandbox`."""
        options = self._sandbox_kwargs(label, egress, default_timeout, secret_refs, kwargs)
        return AsyncSandbox(self.id, **options)

    async def status(self) -> TemplateStatus:
        """See :meth:`Env.status`."""
        self._check_gateway()
        return await AsyncTemplate.status(self.client, self.id)

    async def wait(self, timeout: float = 600.0, **kwargs: Any) -> TemplateStatus:
        """See :meth:`Env.wait`."""
        self._check_gateway()
        return await AsyncTemplateHandle(self.client, self.id).wait(timeout, **kwargs)

    async def release(self) -> None:
        """See :meth:`Env.release`."""
        if self._take_release():
            await adrive(_release_op(self.id), self.client)

    async def __aenter__(self) -> AsyncEnv:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()


def environment(
    client: Any,
    ref: str,
    *,
    width: int | None = None,
    name: str | None = None,
    ready: Ready | Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    secrets: Sequence[str] | None = None,
) -> Env:
    """Resolve ``ref`` to an :class:`Env`: inherit, declare a width, or bake.

    What ``client.env(ref, width=..., ...)`` does. On the gateway:

    1. a public catalog image and no overrides (``ready``/``env``): inherit
       its shared pool (no bake, no declaration; ``width`` is a hint);
    2. no width and no overrides: a plain handle on ``ref`` (or the matching
       row; the catalog is not read when ``name`` is given);
    3. overrides on a public catalog image: bake a private template with a
       pool of ``width`` (default 1) and release it on exit;
    4. an owned template or raw id: declare ``width`` (if given) with
       ``expect_width`` and release it on exit; overrides are ignored.

    On the local node or daemon the template ids are built in: the result is
    a plain handle and ``width`` is only a hint; overrides need a bake, which
    only the gateway offers.

    ``secrets`` become the env's ``secret_refs``; they never reach a bake.

    >>> from collimate_rl.sandbox._shell import ShellClient
    >>> env = environment(ShellClient(), "python3", width=32)
    >>> env.id, env.releasable
    ('python3', False)

    Raises:
        CollimateNotFoundError: (node) the node does not serve ``ref``.
        CollimateUsageError: (node) overrides, which need a bake.
    """
    op = _environment_op(client, ref, width=width, name=name, ready=ready, env=env)
    tid, releasable = drive(op, client)
    return Env(client, tid, ref=ref, releasable=releasable, secret_refs=secrets)


async def environment_async(
    client: Any,
    ref: str,
    *,
    width: int | None = None,
    name: str | None = None,
    ready: Ready | Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    secrets: Sequence[str] | None = None,
) -> AsyncEnv:
    """The async twin of :func:`environment` (for ``AsyncGatewayClient`` / ``AsyncCollimateClient``)."""
    op = _environment_op(client, ref, width=width, name=name, ready=ready, env=env)
    tid, releasable = await adrive(op, client)
    return AsyncEnv(client, tid, ref=ref, releasable=releasable, secret_refs=secrets)
