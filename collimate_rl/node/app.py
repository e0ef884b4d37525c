"""The node's ASGI app: the daemon contract's routes plus the fork and bake extensions.

Routes (all JSON; errors are ``{error, error_code}``):

=======  ============================  =====  ==========================================
GET      /v1/health, /health           200
GET      /metrics                      200    Prometheus text (docs/operations.md)
GET      /v1/sessions                  200    list of SessionInfo
POST     /v1/sessions                  201    400, 404 no_template, 502 service_not_ready,
                                              503 at_capacity/draining
GET      /v1/sessions/{id}             200    404 no_such_session
DELETE   /v1/sessions/{id}             200    404 (``deleted: false``)
POST     /v1/sessions/{id}/exec        200    400, 404, 410 session_gone, 503
POST     /v1/sessions/{id}/fork        201    404, 409 session_busy, 410, 503
POST     /v1/exec, /exec               200    400, 404 no_template, 503
POST     /v1/templates                 201    400, 404 no_template, 409 template_exists,
                                              400 bake_failed, 503
GET      /v1/images                    200    (the image store: ``{"images": [row]}``)
GET      /v1/images/pulls              200    (pulls under way, bytes done and total)
POST     /v1/images/prune              200    (removes images no template uses)
POST     /v1/exec/batch                200    400, 503 (per-item errors in the body)
POST     /v1/sessions/delete           200    400
=======  ============================  =====  ==========================================

Anywhere: 404 ``not_found`` (unknown path), 405 ``method_not_allowed``, 413
``payload_too_large``, 500 ``internal_error`` (a short message, never a
traceback). Request bodies are read as JSON whatever their ``Content-Type``.
Every response carries ``X-Request-Id`` (the client's own, or a new
``req_<16 hex>``; :mod:`collimate_rl.node.request_ids`).
With a token (``serve --token-file``), 401 ``unauthorized`` for any request
without ``Authorization: Bearer <token>``, before anything else. An exec whose
client disconnects is cancelled: its processes are killed, its slot is freed.

The fork extension (not in the daemon contract): ``POST /v1/sessions/{id}/fork``
with ``{"count": 1..256}`` (default 1) copy-on-write forks an idle session and
answers 201 ``{"parent": id, "children": [{"id", "session_id", "template_id",
"fork_time_ms", "create_time_ms"}, ...]}`` (``id`` == ``session_id``; the
times are the whole fork call's). Children see the parent's files as of the
fork; later writes are private. All or nothing; a session with an exec
running answers 409 ``session_busy``; children count against the session cap.

The bake extension: ``POST /v1/templates`` with ``{"template_id", "base":
"python3", "setup": [commands], "network": false}`` runs the operator's setup
commands once in a sandbox over ``base`` and freezes the result as a new
template (201 ``{"template_id", "base", "bake_time_ms", "templates"}``). An
optional ``"ready": {"cmd", "ports", "http", "http_timeout_s", "env"}`` (the
gateway's ReadySpec) with ``ports`` makes every session run ``cmd`` as a server;
its create response then carries ``"endpoints": {"<port>": "127.0.0.1:<p>"}``
(see docs/services.md). ``"network": true`` makes the template networked and
``"egress": {...}`` gives it a default policy. ``"image": REF`` instead of a base
pulls an OCI image (a registry reference, ``oci:DIR[:tag]``, ``oci-archive:FILE``,
``docker-archive:FILE``) into the node's image store and makes its root
filesystem every session's ``/`` (``node/image_templates.py``; 404 ``not_found``,
502 ``upstream_error``, 402 ``quota_exceeded``, 400 for a bad reference or image); its
``setup`` then runs in that root, as the image's user with its ``/bin/sh`` (400
``bad_request`` for an image without one, 400 ``bake_failed`` for a failing command).

Egress (docs/egress.md): ``POST /v1/sessions`` and ``POST /v1/exec`` take an
``egress`` policy for networked templates (every built-in has a twin
``<id>-net``); ``GET /v1/sessions/{id}`` of a networked session shows the
policy and the proxy's counters under ``egress``.

The batch extensions (GRPO groups in one request): ``POST /v1/exec/batch`` with
``{"items": [{"session_id": id | null, "template_id", ...exec fields}, ...]}``
(1..1024 items; no ``session_id``: a one-shot exec in ``template_id``) runs the
items concurrently and answers 200 ``{"results": [...]}`` in item order, each an
exec response or ``{"error", "error_code", "status", "request_id"}`` (the status the
single route would have answered; the batch's request id, which the item's line in the
node's log names). Admission takes a place per item, in order, while
places (running slots plus queue) are free: none free is 503 ``at_capacity``
for the batch (nothing ran), and items past the free places get
``at_capacity`` as their own error (they did not run); admitted items wait for
running slots. ``POST /v1/sessions/delete`` with ``{"session_ids": [...]}`` deletes them
together and answers ``{"deleted": [...], "missing": [...]}``.

>>> from collimate_rl.node.runtime.base import Isolation
>>> class NoRuntime:
...     isolation = Isolation.NONE
...     def templates(self) -> list[str]:
...         return ["python3"]
>>> app = create_app(NoRuntime())  # type: ignore[arg-type]
>>> sorted(app.openapi()["paths"])  # doctest: +NORMALIZE_WHITESPACE
['/v1/exec', '/v1/exec/batch', '/v1/health', '/v1/images', '/v1/images/prune',
 '/v1/images/pulls', '/v1/sessions', '/v1/sessions/delete', '/v1/sessions/{session_id}',
 '/v1/sessions/{session_id}/exec', '/v1/sessions/{session_id}/fork', '/v1/templates']
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, Request
from fastapi.openapi.utils import get_openapi
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from collimate_rl._version import __version__
from collimate_rl.node.auth import BearerTokenMiddleware
from collimate_rl.node.core import Node, NodeConfig
from collimate_rl.node.disconnect import ClientGone, on_client_gone, until_client_leaves
from collimate_rl.node.errors import (
    CatchAllMiddleware,
    error_response,
    install_error_handlers,
)
from collimate_rl.node.metrics import CONTENT_TYPE
from collimate_rl.node.models import (
    BakeRequest,
    BakeResponse,
    BatchDeleteRequest,
    BatchExecRequest,
    CreateSessionRequest,
    CreateSessionResponse,
    DeleteResponse,
    ErrorResponse,
    ExecRequest,
    ExecResponse,
    ForkRequest,
    ForkResponse,
    HealthResponse,
    OneShotExecRequest,
    SessionInfo,
)
from collimate_rl.node.request_ids import RequestIdMiddleware
from collimate_rl.node.runtime.base import Runtime

__all__ = ["BodyLimitMiddleware", "JsonBodyMiddleware", "create_app"]


async def _node(request: Request) -> Node:
    # async: FastAPI runs a plain-function dependency in a thread, a hop per request
    node: Node = request.app.state.node
    return node


NodeDep = Annotated[Node, Depends(_node)]


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorResponse} for code in codes}


router = APIRouter()


@router.get("/v1/health", response_model=HealthResponse, tags=["node"])
@router.get("/health", response_model=HealthResponse, include_in_schema=False)
async def health(node: NodeDep) -> JSONResponse:
    """Status, counts, templates, version and the isolation in force."""
    return JSONResponse(node.health())


@router.get("/metrics", include_in_schema=False)
async def metrics(node: NodeDep) -> Response:
    """The node's Prometheus metrics, in the text format (:mod:`collimate_rl.node.metrics`)."""
    return Response(node.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/v1/sessions", response_model=list[SessionInfo], tags=["sessions"])
async def list_sessions(node: NodeDep) -> JSONResponse:
    """Every live session."""
    return JSONResponse([rec.info() for rec in node.sessions.records()])


@router.post(
    "/v1/sessions",
    status_code=201,
    response_model=CreateSessionResponse,
    responses=_errors(400, 404, 503),
    tags=["sessions"],
)
async def create_session(req: CreateSessionRequest, node: NodeDep) -> JSONResponse:
    """Create a session from a template (usually a warm-pool hit)."""
    return JSONResponse(await node.create_session(req), status_code=201)


@router.get(
    "/v1/sessions/{session_id}",
    response_model=SessionInfo,
    responses=_errors(404),
    tags=["sessions"],
)
async def get_session(session_id: str, node: NodeDep) -> JSONResponse:
    """One session's info (a networked session's egress policy and counters too)."""
    return JSONResponse(node.sessions.get(session_id).info(detail=True))


@router.delete(
    "/v1/sessions/{session_id}",
    response_model=DeleteResponse,
    responses={404: {"model": DeleteResponse}},
    tags=["sessions"],
)
async def delete_session(session_id: str, node: NodeDep) -> JSONResponse:
    """Destroy a session and every process in it."""
    if await node.sessions.delete(session_id):
        return JSONResponse({"deleted": True, "session_id": session_id})
    return error_response(
        "no_such_session",
        f"no session {session_id!r}",
        extra={"deleted": False, "session_id": session_id},
    )


@router.post(
    "/v1/sessions/{session_id}/exec",
    response_model=ExecResponse,
    responses=_errors(400, 404, 410, 500, 503),
    tags=["exec"],
)
async def exec_in_session(
    session_id: str, req: ExecRequest, node: NodeDep, request: Request
) -> JSONResponse:
    """Run a command, argv list or code in a session (files written first).

    A client that disconnects first cancels it (see :mod:`collimate_rl.node.disconnect`).
    """
    work = node.exec_in_session(session_id, req)
    return JSONResponse(await until_client_leaves(request.receive, work))


@router.post(
    "/v1/templates",
    status_code=201,
    response_model=BakeResponse,
    # 402: an image over the store's quota; 502: its registry failed (upstream_error)
    responses=_errors(400, 402, 404, 409, 502, 503),
    tags=["templates"],
)
async def bake_template(req: BakeRequest, node: NodeDep) -> JSONResponse:
    """Bake setup commands over a base template (or an OCI image) into a new one
    (local-node extension)."""
    return JSONResponse(await node.bake(req), status_code=201)


@router.get("/v1/images", tags=["templates"])
async def list_images(node: NodeDep) -> JSONResponse:
    """The node's image store: each image's reference, size and the templates using it
    (local-node extension; rows shaped like the gateway's catalog rows)."""
    rows = await asyncio.to_thread(node.images.rows)
    return JSONResponse({"images": rows})


@router.get("/v1/images/pulls", tags=["templates"])
async def image_pulls(node: NodeDep) -> JSONResponse:
    """Pulls under way: bytes done and to fetch, per reference (a CLI's progress bar)."""
    return JSONResponse({"pulls": {ref: dict(p) for ref, p in node.images.pulls.items()}})


@router.post("/v1/images/prune", tags=["templates"])
async def prune_images(node: NodeDep) -> JSONResponse:
    """Remove the images no template uses, and the layers and blobs only they used."""
    return JSONResponse(await node.images.prune())


@router.post(
    "/v1/sessions/{session_id}/fork",
    status_code=201,
    response_model=ForkResponse,
    responses=_errors(400, 404, 409, 410, 503),
    tags=["sessions"],
)
async def fork_session(
    session_id: str, node: NodeDep, req: Annotated[ForkRequest | None, Body()] = None
) -> JSONResponse:
    """Copy-on-write fork of an idle session into ``count`` children (local-node extension)."""
    count = req.count if req is not None else 1
    return JSONResponse(await node.fork(session_id, count), status_code=201)


@router.post(
    "/v1/exec",
    response_model=ExecResponse,
    responses=_errors(400, 404, 410, 500, 503),
    tags=["exec"],
)
@router.post("/exec", response_model=ExecResponse, include_in_schema=False)
async def exec_once(req: OneShotExecRequest, node: NodeDep, request: Request) -> JSONResponse:
    """One-shot exec: create a session, run, and always delete it (also when the client leaves)."""
    return JSONResponse(await until_client_leaves(request.receive, node.exec_once(req)))


@router.post("/v1/exec/batch", responses=_errors(400, 503), tags=["exec"])
async def exec_batch(req: BatchExecRequest, node: NodeDep, request: Request) -> JSONResponse:
    """Many execs in one request, each in its session or one-shot (local-node extension).

    A client that disconnects first cancels every item still running.
    """
    return JSONResponse(await until_client_leaves(request.receive, node.exec_batch(req.items)))


@router.post("/v1/sessions/delete", responses=_errors(400), tags=["sessions"])
async def delete_sessions(req: BatchDeleteRequest, node: NodeDep) -> JSONResponse:
    """Delete many sessions together (local-node extension)."""
    return JSONResponse(await node.delete_many(req.session_ids))


class BodyLimitMiddleware:
    """Refuse bodies whose declared length exceeds the limit (413 ``payload_too_large``)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope.get("headers", ()):
                if name == b"content-length":
                    try:
                        too_big = int(value) > self.max_body_bytes
                    except ValueError:
                        too_big = False
                    if too_big:
                        response = error_response(
                            "payload_too_large",
                            f"request body over {self.max_body_bytes} bytes",
                        )
                        await response(scope, receive, send)
                        return
        await self.app(scope, receive, send)


class JsonBodyMiddleware:
    """Read every request body as JSON, whatever its ``Content-Type`` says.

    The contract's clients always send ``application/json``; this keeps a
    hand-typed ``curl -d '{...}'`` (form-encoded by default) working too.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            headers = [(k, v) for k, v in scope.get("headers", ()) if k != b"content-type"]
            headers.append((b"content-type", b"application/json"))
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


def _openapi_without_422(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """FastAPI documents 422 for validation errors; this node answers 400."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    operation.get("responses", {}).pop("422", None)
            schemas = schema.get("components", {}).get("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            app.openapi_schema = schema
        return app.openapi_schema

    return build


def create_app(
    runtime: Runtime,
    config: NodeConfig | None = None,
    *,
    manage_lifecycle: bool = True,
    token: str | None = None,
    metrics_token: str | None = None,
) -> FastAPI:
    """Build the node's ASGI app around ``runtime``.

    ``app.state.node`` is the :class:`Node`. With ``manage_lifecycle`` the
    app's lifespan starts it (runtime, warm pool, reaper) and closes
    everything on shutdown; without, the caller does (as :func:`serve` does,
    so a failed start is reported before anything listens).

    Args:
        runtime: the sandbox runtime (not yet started).
        config: the node's tunables.
        manage_lifecycle: start and close the node in the ASGI lifespan.
        token: require ``Authorization: Bearer <token>`` on every request
            (:mod:`collimate_rl.node.auth`); ``None``: no auth, as the daemon.
        metrics_token: with ``token``, a second token that opens ``GET /metrics`` only.
    """
    node = Node(runtime, config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not manage_lifecycle:
            yield
            return
        try:
            await node.start()
            yield
        finally:
            await node.close()

    app = FastAPI(
        title="collimate-rl node",
        version=__version__,
        description="The local sandbox node: the Collimate daemon contract over HTTP.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        # the routes themselves, not include_router: since FastAPI 0.137 an included router
        # is matched through a wrapper, ~50 us more per request on our machines
        routes=list(router.routes),
    )
    app.state.node = node
    install_error_handlers(app)
    app.add_exception_handler(ClientGone, on_client_gone)
    app.add_middleware(CatchAllMiddleware)
    app.add_middleware(JsonBodyMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=node.config.max_body_bytes)
    if token is not None:  # a request without it reaches nothing else
        app.add_middleware(BearerTokenMiddleware, token=token, metrics_token=metrics_token)
    # outermost: every answer (a 401 too) carries its id and is counted
    app.add_middleware(RequestIdMiddleware, metrics=node.metrics)
    app.openapi = _openapi_without_422(app)  # type: ignore[method-assign]
    return app
