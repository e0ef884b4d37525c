"""The node-local daemon's endpoints as flows (see :mod:`collimate_rl.wire._core`).

Each function validates its arguments *before* yielding anything, builds the
request, and parses the answer into a model. The sync and async daemon
clients only drive these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from collimate_rl.errors import (
    CollimateError,
    CollimateUsageError,
    error_from_envelope,
    note_request_id,
)
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
    CreateSessionResponse,
    DeleteResponse,
    ExecResponse,
    ForkResponse,
    Health,
    SessionInfo,
    TemplateList,
)

__all__ = [
    "create_session",
    "delete_session",
    "delete_sessions",
    "exec_batch",
    "exec_once",
    "fork_session",
    "get_session",
    "health",
    "images_unsupported",
    "list_sessions",
    "session_exec",
    "templates",
]


def _get(ctx: CallContext, path: str) -> Request:
    return Request("GET", path, timeout=ctx.timeout)


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def health(ctx: CallContext) -> Flow[Health]:
    """``GET /v1/health``."""
    return Health.from_raw(_as_dict((yield from call(ctx, _get(ctx, "/v1/health")))))


def templates(ctx: CallContext) -> Flow[list[str]]:
    """The node's template ids, from its health object (a :class:`TemplateList`)."""
    info = yield from health(ctx)
    return TemplateList((str(t) for t in info.templates), info.unavailable_templates)


def images_unsupported() -> CollimateError:
    """The error ``images()`` raises on a daemon client."""
    return CollimateError(
        "images() is gateway only: the node-local daemon has no image catalog; "
        "use templates() here, or connect with an API key (COLLIMATE_API_KEY) for the gateway"
    )


def list_sessions(ctx: CallContext) -> Flow[list[SessionInfo]]:
    """``GET /v1/sessions``; a body that is not a list gives ``[]``."""
    rows = yield from call(ctx, _get(ctx, "/v1/sessions"))
    if not isinstance(rows, list):
        return []
    return [SessionInfo.from_raw(r) for r in rows if isinstance(r, dict)]


def create_session(
    ctx: CallContext, template_id: str, egress: Mapping[str, Any] | None
) -> Flow[CreateSessionResponse]:
    """``POST /v1/sessions`` (not idempotent)."""
    path_id(template_id, "template_id")
    body: dict[str, Any] = {"template_id": template_id}
    if egress is not None:
        body["egress"] = dict(egress)
    req = Request("POST", "/v1/sessions", body, idempotent=False, timeout=ctx.timeout)
    return CreateSessionResponse.from_raw(_as_dict((yield from call(ctx, req))))


def get_session(ctx: CallContext, session_id: str) -> Flow[SessionInfo]:
    """``GET /v1/sessions/{id}``."""
    path = f"/v1/sessions/{path_id(session_id)}"
    return SessionInfo.from_raw(_as_dict((yield from call(ctx, _get(ctx, path)))))


def delete_session(ctx: CallContext, session_id: str) -> Flow[DeleteResponse]:
    """``DELETE /v1/sessions/{id}``; never raises a CollimateError."""
    failed = DeleteResponse.from_raw({"deleted": False, "session_id": session_id})
    try:
        req = Request("DELETE", f"/v1/sessions/{path_id(session_id)}", timeout=ctx.timeout)
        raw = _as_dict((yield from call(ctx, req)))
    except CollimateError:
        return failed
    raw.setdefault("session_id", session_id)
    return DeleteResponse.from_raw(raw)


def _exec(ctx: CallContext, path: str, body: dict[str, Any]) -> Flow[ExecResponse]:
    timeout = exec_timeout(ctx, body["timeout_seconds"])
    req = Request("POST", path, body, idempotent=False, timeout=timeout)
    return ExecResponse.from_raw(_as_dict((yield from call(ctx, req))))


def session_exec(
    ctx: CallContext,
    session_id: str,
    *,
    command: str | None,
    code: str | None,
    commands: Sequence[Sequence[str]] | None,
    files: Sequence[Mapping[str, str]] | None,
    timeout_seconds: int,
    seed: str | None,
) -> Flow[ExecResponse]:
    """``POST /v1/sessions/{id}/exec`` (not idempotent)."""
    path = f"/v1/sessions/{path_id(session_id)}/exec"
    body = build_exec_body(
        command=command,
        code=code,
        commands=commands,
        files=files,
        timeout_seconds=timeout_seconds,
        seed=seed,
    )
    return (yield from _exec(ctx, path, body))


def exec_once(
    ctx: CallContext,
    template_id: str,
    *,
    command: str | None,
    code: str | None,
    commands: Sequence[Sequence[str]] | None,
    files: Sequence[Mapping[str, str]] | None,
    timeout_seconds: int,
    seed: str | None,
    egress: Mapping[str, Any] | None,
) -> Flow[ExecResponse]:
    """``POST /v1/exec``: fork, run, discard in one call (not idempotent)."""
    body = build_exec_body(
        command=command,
        code=code,
        commands=commands,
        files=files,
        timeout_seconds=timeout_seconds,
        seed=seed,
        template_id=template_id,
        egress=egress,
    )
    return (yield from _exec(ctx, "/v1/exec", body))


def bake_template(
    ctx: CallContext,
    template_id: str,
    setup: Sequence[str],
    base: str,
    network: bool,
    timeout: float | None,
    ready: Mapping[str, Any] | None = None,
    egress: Mapping[str, Any] | None = None,
    image: str | None = None,
) -> Flow[dict[str, Any]]:
    """``POST /v1/templates`` (our node's extension; not idempotent). With ``image``, the
    node pulls that OCI image and makes its root filesystem the template's (``setup`` runs
    once in that root first; its result is one more layer)."""
    path_id(template_id, "template_id")
    if isinstance(setup, str) or not all(isinstance(c, str) for c in setup):
        raise CollimateUsageError("setup must be a list of shell commands")
    if image is not None:
        if not isinstance(image, str) or not image.strip():
            raise CollimateUsageError(f"image must be an image reference, got {image!r}")
        pulled: dict[str, Any] = {"template_id": template_id, "image": image}
        if setup:
            pulled["setup"] = list(setup)
        if network:
            pulled["network"] = True
        if ready:
            pulled["ready"] = dict(ready)
        if egress is not None:
            pulled["egress"] = dict(egress)
        wait = max(ctx.timeout, timeout or 0.0)
        req = Request("POST", "/v1/templates", pulled, idempotent=False, timeout=wait)
        return _as_dict((yield from call(ctx, req)))
    if not setup and not ready and not network and egress is None:
        raise CollimateUsageError(
            "setup must list at least one command (or give ready, network=True or egress)"
        )
    body: dict[str, Any] = {
        "template_id": template_id,
        "base": base,
        "setup": list(setup),
        "network": network,
    }
    if ready:
        body["ready"] = dict(ready)
    if egress is not None:
        body["egress"] = dict(egress)
    wait = max(ctx.timeout, timeout or 0.0)
    req = Request("POST", "/v1/templates", body, idempotent=False, timeout=wait)
    return _as_dict((yield from call(ctx, req)))


def store_images(ctx: CallContext) -> Flow[list[dict[str, Any]]]:
    """``GET /v1/images`` of our node: the images in its store (reference, size, users)."""
    raw = yield from call(ctx, _get(ctx, "/v1/images"))
    rows = raw.get("images") if isinstance(raw, dict) else raw
    return [r for r in rows or [] if isinstance(r, dict)]


def image_pulls(ctx: CallContext) -> Flow[dict[str, Any]]:
    """``GET /v1/images/pulls`` of our node: reference -> bytes done and total."""
    raw = yield from call(ctx, _get(ctx, "/v1/images/pulls"))
    pulls = raw.get("pulls") if isinstance(raw, dict) else None
    return dict(pulls) if isinstance(pulls, dict) else {}


def prune_images(ctx: CallContext) -> Flow[dict[str, Any]]:
    """``POST /v1/images/prune`` of our node: remove the images no template uses."""
    req = Request("POST", "/v1/images/prune", {}, idempotent=True, timeout=ctx.timeout)
    return _as_dict((yield from call(ctx, req)))


def fork_session(ctx: CallContext, session_id: str, count: int) -> Flow[ForkResponse]:
    """``POST /v1/sessions/{id}/fork`` (our node's extension; all-or-nothing, not idempotent)."""
    path = f"/v1/sessions/{path_id(session_id)}/fork"
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise CollimateUsageError(f"count must be an int >= 1, got {count!r}")
    req = Request("POST", path, {"count": count}, idempotent=False, timeout=ctx.timeout)
    raw = _as_dict((yield from call(ctx, req)))
    children = [c for c in raw.get("children") or [] if isinstance(c, dict)]
    return ForkResponse.build(str(raw.get("parent") or session_id), children)


#: What one item of :func:`exec_batch` gives: the exec's response or its error.
BatchResult = ExecResponse | CollimateError


def exec_batch(ctx: CallContext, items: Sequence[Mapping[str, Any]]) -> Flow[list[BatchResult]]:
    """``POST /v1/exec/batch`` (our node's extension; not idempotent).

    ``items`` are ``session_exec`` / ``exec_once`` keyword arguments plus
    ``session_id`` or ``template_id`` (a one-shot item may carry ``egress``);
    each is validated like a single exec.
    Returns one :class:`ExecResponse` or :class:`CollimateError` per item, in
    order. A node without the extension raises ``CollimateNotFoundError``
    (``error_code`` ``not_found``).
    """
    if not items:
        return []
    bodies = []
    longest = 1
    for item in items:
        fields = dict(item)
        session_id, template_id = fields.pop("session_id", None), fields.pop("template_id", None)
        if (session_id is None) == (template_id is None):
            raise CollimateUsageError("each batch item needs a session_id or a template_id")
        egress = fields.pop("egress", None)
        if egress is not None and session_id is not None:
            raise CollimateUsageError(
                "egress applies to one-shot batch items; a session's policy is set at its creation"
            )
        body = build_exec_body(
            command=fields.pop("command", None),
            code=fields.pop("code", None),
            commands=fields.pop("commands", None),
            files=fields.pop("files", None),
            timeout_seconds=fields.pop("timeout_seconds", 30),
            seed=fields.pop("seed", None),
            template_id=template_id,
            egress=egress,
        )
        if fields:
            raise CollimateUsageError(f"unknown batch item fields: {sorted(fields)}")
        if session_id is not None:
            body["session_id"] = path_id(session_id)
        longest = max(longest, int(body["timeout_seconds"]))
        bodies.append(body)
    req = Request(
        "POST",
        "/v1/exec/batch",
        {"items": bodies},
        idempotent=False,
        timeout=exec_timeout(ctx, longest),
    )
    raw = _as_dict((yield from call(ctx, req)))
    results = raw.get("results")
    if not isinstance(results, list) or len(results) != len(bodies):
        raise CollimateError(f"the node answered a batch of {len(bodies)} with {raw!r:.200}")
    out: list[BatchResult] = []
    for result in results:
        result = _as_dict(result)
        if "error" in result:
            status = result.get("status")
            err = error_from_envelope(status if isinstance(status, int) else 500, result)
            request_id = result.get("request_id")  # our node names the batch's request
            out.append(note_request_id(err, request_id if isinstance(request_id, str) else None))
        else:
            out.append(ExecResponse.from_raw(result))
    return out


def delete_sessions(ctx: CallContext, session_ids: Sequence[str]) -> Flow[list[str]]:
    """``POST /v1/sessions/delete`` (our node's extension); the ids deleted.

    Raises ``CollimateNotFoundError`` on a node without the extension (the
    caller then deletes one by one).
    """
    ids = [path_id(sid) for sid in session_ids]
    if not ids:
        return []
    req = Request("POST", "/v1/sessions/delete", {"session_ids": ids}, timeout=ctx.timeout)
    raw = _as_dict((yield from call(ctx, req)))
    return [str(sid) for sid in raw.get("deleted") or []]
