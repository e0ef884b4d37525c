"""The managed gateway's endpoints as flows (see :mod:`collimate_rl.wire._core`).

Multi-step protocols live here once: ``exec_once`` (create -> exec -> delete,
always reaping) and ``fork`` (chunked to the tier's per-call cap, reaping
every child on any failure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from collimate_rl.errors import CollimateError, CollimateUsageError, ForkShortError, GatewayError
from collimate_rl.wire._core import (
    CallContext,
    Flow,
    Request,
    build_exec_body,
    call,
    exec_timeout,
    path_id,
)
from collimate_rl.wire.models import (
    ConnectURL,
    CreateSessionResponse,
    DeleteResponse,
    ExecResponse,
    ForkResponse,
    Health,
    ImageInfo,
    SessionInfo,
    StateResponse,
    TemplateInfo,
    Usage,
)

__all__ = [
    "CDP_PORT",
    "CONNECT_URL_MAX_TTL",
    "DEFAULT_FORK_CAP",
    "DEFAULT_GATEWAY_URL",
    "FORK_CAPS",
    "fork_cap",
    "parse_tier",
]

DEFAULT_GATEWAY_URL: Final = "https://api.collimate.ai"
CONNECT_URL_MAX_TTL: Final = 3600
CDP_PORT: Final = 9222
#: Per-call fork fan-out cap by tier.
FORK_CAPS: Final[dict[str, int]] = {"demo": 4, "pro": 32, "ent": 64}
DEFAULT_FORK_CAP: Final = 32


def parse_tier(api_key: str) -> str | None:
    """The tier named by a ``col_<tier>_<id8>_<secret32>`` key, or None.

    >>> parse_tier("col_pro_abcd1234_" + "x" * 32), parse_tier("sk-nope")
    ('pro', None)
    """
    parts = api_key.split("_")
    if len(parts) >= 3 and parts[0] == "col" and parts[1] in FORK_CAPS:
        return parts[1]
    return None


def fork_cap(tier: str | None) -> int:
    """The per-call fork cap of a tier (demo 4, pro 32, ent 64; unknown 32).

    >>> fork_cap("demo"), fork_cap(None)
    (4, 32)
    """
    return FORK_CAPS.get(tier or "", DEFAULT_FORK_CAP)


# ------------------------------------------------------------------ helpers


def _req(ctx: CallContext, method: str, path: str, body: Any = None, **kw: Any) -> Request:
    return Request(method, path, body, timeout=ctx.timeout, **kw)


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _rows(value: Any, *keys: str) -> list[dict[str, Any]]:
    """Rows from ``{key: [...]}`` (first key present) or a bare list."""
    if isinstance(value, dict):
        value = next((value[k] for k in keys if isinstance(value.get(k), list)), [])
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def _sandbox_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """Add the daemon-parity aliases ``session_id`` (= id) and ``template_id`` (= template)."""
    out = dict(row)
    if "session_id" not in out and "id" in out:
        out["session_id"] = out["id"]
    if "template_id" not in out and "template" in out:
        out["template_id"] = out["template"]
    return out


def _timestamp(value: str | datetime | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


def _ready_wire(ready: Any, env: Mapping[str, str] | None) -> dict[str, Any] | None:
    """The ReadySpec: ``ready`` (a dict or an object with ``to_wire()``) plus ``env``."""
    if ready is not None and hasattr(ready, "to_wire"):
        ready = ready.to_wire()
    spec = dict(ready or {})
    if env:
        spec["env"] = {**env, **(spec.get("env") or {})}
    spec = {k: v for k, v in spec.items() if v}
    return spec or None


# ----------------------------------------------------------- basic endpoints


def health(ctx: CallContext) -> Flow[Health]:
    """``GET /v1/health``."""
    return Health.from_raw(_as_dict((yield from call(ctx, _req(ctx, "GET", "/v1/health")))))


def images(ctx: CallContext) -> Flow[list[ImageInfo]]:
    """``GET /v1/images``: ``{images:[...]}``, ``{templates:[...]}`` or a bare list."""
    value = yield from call(ctx, _req(ctx, "GET", "/v1/images"))
    return [ImageInfo.from_raw(r) for r in _rows(value, "images", "templates")]


def create_template(
    ctx: CallContext,
    *,
    name: str,
    image: str,
    ready: Any,
    env: Mapping[str, str] | None,
    width: int,
    cold_fraction: int,
    expected_width: int | None,
) -> Flow[TemplateInfo]:
    """``POST /v1/templates`` (idempotent: the server names the bake deterministically)."""
    for what, value in (("name", name), ("image", image)):
        if not isinstance(value, str) or not value:
            raise CollimateUsageError(f"{what} must be a non-empty string, got {value!r}")
    pool: dict[str, Any] = {"width": int(width)}
    if cold_fraction:
        pool["cold_fraction"] = int(cold_fraction)
    body: dict[str, Any] = {"name": name, "image": image, "pool": pool}
    spec = _ready_wire(ready, env)
    if spec is not None:
        body["ready"] = spec
    if expected_width:
        body["expected_width"] = int(expected_width)
    raw = yield from call(ctx, _req(ctx, "POST", "/v1/templates", body))
    return TemplateInfo.from_raw(_as_dict(raw))


def list_templates(ctx: CallContext) -> Flow[list[TemplateInfo]]:
    """``GET /v1/templates`` (own rows and public ones)."""
    value = yield from call(ctx, _req(ctx, "GET", "/v1/templates"))
    return [TemplateInfo.from_raw(r) for r in _rows(value, "templates")]


def get_template(ctx: CallContext, template_id: str) -> Flow[TemplateInfo]:
    """``GET /v1/templates/{id}``: the bake and pool status."""
    path = f"/v1/templates/{path_id(template_id, 'template_id')}"
    return TemplateInfo.from_raw(_as_dict((yield from call(ctx, _req(ctx, "GET", path)))))


def delete_template(ctx: CallContext, template_id: str) -> Flow[DeleteResponse]:
    """``DELETE /v1/templates/{id}``; a 403 on a shared catalog row gets an explanation."""
    path = f"/v1/templates/{path_id(template_id, 'template_id')}"
    try:
        raw = yield from call(ctx, _req(ctx, "DELETE", path))
    except GatewayError as exc:
        if exc.status == 403 and "catalog" not in str(exc).lower():
            raise type(exc)(
                f"'{template_id}' is a shared catalog image and cannot be deleted: "
                "only templates you baked can be deleted",
                status=exc.status,
                error_code=exc.error_code,
            ) from exc
        raise
    return DeleteResponse.from_raw(_as_dict(raw))


def expect_width(ctx: CallContext, template_id: str, width: int) -> Flow[StateResponse]:
    """``POST /v1/templates/{id}/expect``: declare the warm width you will use."""
    path = f"/v1/templates/{path_id(template_id, 'template_id')}/expect"
    raw = yield from call(ctx, _req(ctx, "POST", path, {"width": int(width)}))
    return StateResponse.from_raw(_as_dict(raw))


def release_template(ctx: CallContext, template_id: str) -> Flow[StateResponse]:
    """``POST /v1/templates/{id}/release``: let the pool decay."""
    path = f"/v1/templates/{path_id(template_id, 'template_id')}/release"
    return StateResponse.from_raw(_as_dict((yield from call(ctx, _req(ctx, "POST", path, {})))))


# ------------------------------------------------------------------ sandboxes


def create_sandbox(
    ctx: CallContext,
    template: str,
    *,
    label: str | None,
    labels: Mapping[str, str] | None,
    egress: Mapping[str, Any] | None,
    secret_refs: Sequence[str] | None,
) -> Flow[CreateSessionResponse]:
    """``POST /v1/sandboxes`` (not idempotent); adds ``session_id``/``template_id``."""
    path_id(template, "template")
    body: dict[str, Any] = {"template": template}
    for key, value in (("label", label), ("labels", labels), ("egress", egress)):
        if value is not None:
            body[key] = value if isinstance(value, str) else dict(value)
    if secret_refs is not None:
        body["secret_refs"] = list(secret_refs)
    raw = yield from call(ctx, _req(ctx, "POST", "/v1/sandboxes", body, idempotent=False))
    row = _sandbox_row(_as_dict(raw))
    row.setdefault("template_id", template)
    return CreateSessionResponse.from_raw(row)


def list_sandboxes(ctx: CallContext) -> Flow[list[SessionInfo]]:
    """``GET /v1/sandboxes``: the tenant's live sandboxes."""
    value = yield from call(ctx, _req(ctx, "GET", "/v1/sandboxes"))
    return [SessionInfo.from_raw(_sandbox_row(r)) for r in _rows(value, "sandboxes")]


def get_sandbox(ctx: CallContext, sandbox_id: str) -> Flow[SessionInfo]:
    """``GET /v1/sandboxes/{id}``."""
    path = f"/v1/sandboxes/{path_id(sandbox_id, 'sandbox_id')}"
    raw = yield from call(ctx, _req(ctx, "GET", path))
    return SessionInfo.from_raw(_sandbox_row(_as_dict(raw)))


def delete_sandbox(ctx: CallContext, sandbox_id: str) -> Flow[DeleteResponse]:
    """``DELETE /v1/sandboxes/{id}``; never raises a CollimateError."""
    row = {"deleted": False, "id": sandbox_id, "session_id": sandbox_id}
    try:
        path = f"/v1/sandboxes/{path_id(sandbox_id, 'sandbox_id')}"
        raw = _as_dict((yield from call(ctx, _req(ctx, "DELETE", path))))
    except CollimateError:
        return DeleteResponse.from_raw(row)
    raw.setdefault("id", sandbox_id)
    raw.setdefault("session_id", raw["id"])
    return DeleteResponse.from_raw(raw)


def exec_body(ctx: CallContext, sandbox_id: str, body: dict[str, Any]) -> Flow[ExecResponse]:
    """``POST /v1/sandboxes/{id}/exec`` with an already validated body."""
    path = f"/v1/sandboxes/{path_id(sandbox_id, 'sandbox_id')}/exec"
    timeout = exec_timeout(ctx, body["timeout_seconds"])
    req = Request("POST", path, body, idempotent=False, timeout=timeout)
    return ExecResponse.from_raw(_as_dict((yield from call(ctx, req))))


def exec_(ctx: CallContext, sandbox_id: str, **exec_kw: Any) -> Flow[ExecResponse]:
    """Validate, then ``POST /v1/sandboxes/{id}/exec`` (not idempotent)."""
    path_id(sandbox_id, "sandbox_id")
    return (yield from exec_body(ctx, sandbox_id, build_exec_body(**exec_kw)))


def exec_once(
    ctx: CallContext, template_id: str, *, egress: Mapping[str, Any] | None, **exec_kw: Any
) -> Flow[ExecResponse]:
    """Create a sandbox, exec once, and always delete it (also when the exec fails).

    The exec arguments are validated before anything is created.
    """
    body = build_exec_body(**exec_kw)
    created = yield from create_sandbox(
        ctx, template_id, label=None, labels=None, egress=egress, secret_refs=None
    )
    sandbox_id = created.raw.get("id")
    if not sandbox_id:
        raise GatewayError(
            f"create sandbox for template '{template_id}' returned no id; "
            f"cannot exec or reap (response keys: {sorted(created.raw)})"
        )
    try:
        result = yield from exec_body(ctx, str(sandbox_id), body)
    except GeneratorExit:
        raise
    except Exception:
        yield from delete_sandbox(ctx, str(sandbox_id))
        raise
    yield from delete_sandbox(ctx, str(sandbox_id))
    return result


def _fork_chunk(
    ctx: CallContext, sandbox_id: str, count: int, labels: Sequence[str] | None
) -> Flow[list[dict[str, Any]]]:
    body: dict[str, Any] = {"count": count}
    if labels is not None:
        body["labels"] = list(labels)
    path = f"/v1/sandboxes/{path_id(sandbox_id, 'sandbox_id')}/fork"
    raw = yield from call(ctx, _req(ctx, "POST", path, body, idempotent=False))
    return _rows(raw, "children")


def fork(
    ctx: CallContext,
    sandbox_id: str,
    *,
    count: int,
    labels: Sequence[str] | None,
    cap: int,
) -> Flow[ForkResponse]:
    """Fork ``count`` children in sequential calls of at most ``cap``.

    All or nothing: a short chunk raises :class:`ForkShortError`; on any error
    every child created so far is deleted before the error propagates.
    """
    path_id(sandbox_id, "sandbox_id")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise CollimateUsageError(f"count must be an int >= 1, got {count!r}")
    if labels is not None and len(labels) != count:
        raise CollimateUsageError(f"labels must have exactly count={count} entries")
    cap = max(1, int(cap))
    children: list[dict[str, Any]] = []
    try:
        for start in range(0, count, cap):
            n = min(cap, count - start)
            chunk_labels = None if labels is None else labels[start : start + n]
            got = yield from _fork_chunk(ctx, sandbox_id, n, chunk_labels)
            children.extend(c for c in got if c.get("id"))
            if len(got) != n or any(not c.get("id") for c in got):
                raise ForkShortError(
                    f"fork of {sandbox_id!r} asked for {n} children and got "
                    f"{sum(1 for c in got if c.get('id'))} with ids; the group was reaped",
                    error_code="fork_short",
                )
    except GeneratorExit:
        raise
    except Exception:
        for child in children:
            yield from delete_sandbox(ctx, str(child["id"]))
        raise
    return ForkResponse.build(sandbox_id, children)


def _state(ctx: CallContext, sandbox_id: str, verb: str) -> Flow[StateResponse]:
    path = f"/v1/sandboxes/{path_id(sandbox_id, 'sandbox_id')}/{verb}"
    raw = yield from call(ctx, _req(ctx, "POST", path, {}, idempotent=False))
    return StateResponse.from_raw(_as_dict(raw))


def suspend(ctx: CallContext, sandbox_id: str) -> Flow[StateResponse]:
    """``POST /v1/sandboxes/{id}/suspend`` (the meter pauses)."""
    return (yield from _state(ctx, sandbox_id, "suspend"))


def resume(ctx: CallContext, sandbox_id: str) -> Flow[StateResponse]:
    """``POST /v1/sandboxes/{id}/resume``."""
    return (yield from _state(ctx, sandbox_id, "resume"))


def connect_url(
    ctx: CallContext, sandbox_id: str, port: int, *, ttl_seconds: int, protocol: str
) -> Flow[ConnectURL]:
    """``POST /v1/sandboxes/{id}/connect-url``: mint a host->guest URL (Pro/Ent)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise CollimateUsageError(f"port must be an int in 1..65535, got {port!r}")
    if protocol not in ("tcp", "cdp"):
        raise CollimateUsageError(f"protocol must be 'tcp' or 'cdp', got {protocol!r}")
    ttl = max(1, min(CONNECT_URL_MAX_TTL, int(ttl_seconds)))
    body: dict[str, Any] = {"port": port, "ttl_seconds": ttl}
    if protocol != "tcp":
        body["protocol"] = protocol
    path = f"/v1/sandboxes/{path_id(sandbox_id, 'sandbox_id')}/connect-url"
    try:
        raw = yield from call(ctx, _req(ctx, "POST", path, body))
    except GatewayError as exc:
        rewritten = _connect_url_error(exc, port)
        if rewritten is exc:
            raise
        raise rewritten from exc
    return ConnectURL.from_raw(_as_dict(raw))


def cdp_url(ctx: CallContext, sandbox_id: str, *, ttl_seconds: int) -> Flow[str]:
    """A CDP connect URL for the guest's Chrome on :data:`CDP_PORT`."""
    minted = yield from connect_url(
        ctx, sandbox_id, CDP_PORT, ttl_seconds=ttl_seconds, protocol="cdp"
    )
    return minted.url


def _connect_url_error(exc: GatewayError, port: int) -> GatewayError:
    if exc.status == 409 or exc.error_code == "port_not_exposed":
        return type(exc)(
            f"port {port} is not exposed by this sandbox's template; bake the template "
            f"with Ready(ports=[{port}]) (ready.ports) and create a new sandbox",
            status=exc.status,
            error_code=exc.error_code or "port_not_exposed",
        )
    if exc.status == 403 and "pro" not in str(exc).lower():
        return type(exc)(
            "host->guest ingress (connect-url) is a Pro feature; this key's tier cannot "
            "mint connect URLs. Upgrade at collimate.ai/pricing or contact hello@collimate.ai.",
            status=exc.status,
            error_code=exc.error_code,
        )
    return exc


def usage(
    ctx: CallContext, from_ts: str | datetime | None, to_ts: str | datetime | None
) -> Flow[Usage]:
    """``GET /v1/usage[?from=...&to=...]`` (RFC 3339; default window: last 30 days)."""
    params = {k: v for k, v in (("from", _timestamp(from_ts)), ("to", _timestamp(to_ts))) if v}
    raw = yield from call(ctx, _req(ctx, "GET", "/v1/usage", params=params or None))
    return Usage.from_raw(_as_dict(raw))
