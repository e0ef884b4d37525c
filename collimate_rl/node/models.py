"""Wire models of the node's HTTP API (the daemon contract, section 1.3).

Requests are validated here, at the boundary; the handlers never see an
unchecked dict. Unknown request keys are ignored so newer clients keep
working against an older node.

>>> req = ExecRequest.model_validate({"code": "print(1)", "seed": "AB" * 32})
>>> req.timeout_seconds, req.seed == "ab" * 32
(30, True)
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from collimate_rl.node.egress.policy import EgressPolicy

__all__ = [
    "MAX_BATCH_ITEMS",
    "MAX_FORK_COUNT",
    "MAX_TIMEOUT_SECONDS",
    "BakeRequest",
    "BakeResponse",
    "BatchDeleteRequest",
    "BatchExecItem",
    "BatchExecRequest",
    "CreateSessionRequest",
    "CreateSessionResponse",
    "DeleteResponse",
    "ErrorResponse",
    "ExecRequest",
    "ExecResponse",
    "FileSpec",
    "ForkChild",
    "ForkRequest",
    "ForkResponse",
    "HealthResponse",
    "OneShotExecRequest",
    "ReadySpec",
    "SessionInfo",
]

#: The daemon's cap on ``timeout_seconds``.
MAX_TIMEOUT_SECONDS: Final = 3600
#: Largest fan-out of one ``POST /v1/sessions/{id}/fork``.
MAX_FORK_COUNT: Final = 256
#: Most items in one ``POST /v1/exec/batch`` or ``POST /v1/sessions/delete``.
MAX_BATCH_ITEMS: Final = 1024

_SEED_RE: Final = re.compile(r"[0-9a-fA-F]{64}")
_SEED_PATTERN: Final = r"^[0-9a-fA-F]{64}$"


def _check_seed(value: str | None) -> str | None:
    # A plain function (not ``pattern=``) so the error type is ours and the
    # error handler can answer ``invalid_seed`` instead of ``bad_request``.
    if value is None:
        return None
    if not _SEED_RE.fullmatch(value):
        raise ValueError("seed must be exactly 64 hex characters (32 bytes)")
    return value.lower()


Seed = Annotated[
    str | None,
    AfterValidator(_check_seed),
    Field(
        description="32 bytes as 64 hex characters; drawn fresh when omitted.",
        json_schema_extra={"pattern": _SEED_PATTERN},
    ),
]

Egress = Annotated[
    EgressPolicy | None,
    Field(
        description=(
            'Egress policy (docs/egress.md): {"mode": "open"|"none"}, {"allow": [...]}, '
            '{"deny": [...]} or {"preset": "rl-leakage"}; entries are host names, "*." '
            "wildcards, host:port, IPs or CIDRs. Anything but none needs a networked "
            "template (e.g. python3-net); a networked template defaults to open."
        ),
    ),
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileSpec(_Request):
    """A text file written into the sandbox before the exec runs (byte-exact UTF-8)."""

    path: str = Field(min_length=1, max_length=4096, pattern=r"^[^\x00]+$")
    content: str


class CreateSessionRequest(_Request):
    """``POST /v1/sessions``."""

    template_id: str = Field(min_length=1, max_length=256)
    egress: Egress = None


class ExecRequest(_Request):
    """``POST /v1/sessions/{id}/exec`` (``template_id``/``egress`` are ignored there).

    Precedence when several are given: ``command`` > ``commands`` > ``code``.
    """

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "anyOf": [
                {"required": [key], "properties": {key: {"not": {"type": "null"}}}}
                for key in ("command", "commands", "code")
            ]
        },
    )

    timeout_seconds: int = Field(default=30, ge=1, le=MAX_TIMEOUT_SECONDS)
    template_id: str | None = Field(default=None, min_length=1, max_length=256)
    command: str | None = None
    code: str | None = None
    commands: list[Annotated[list[str], Field(min_length=1)]] | None = Field(
        default=None, min_length=1
    )
    files: list[FileSpec] | None = None
    seed: Seed = None
    egress: Egress = None


class OneShotExecRequest(ExecRequest):
    """``POST /v1/exec``: like :class:`ExecRequest` but ``template_id`` is required."""

    template_id: str = Field(min_length=1, max_length=256)


class BatchExecItem(ExecRequest):
    """One exec of a batch: in ``session_id``, or one-shot in ``template_id`` without it."""

    session_id: str | None = Field(default=None, min_length=1, max_length=256)


class BatchExecRequest(_Request):
    """``POST /v1/exec/batch`` (a local-node extension): many execs in one request."""

    items: list[BatchExecItem] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)


class BatchDeleteRequest(_Request):
    """``POST /v1/sessions/delete`` (a local-node extension): delete many sessions."""

    session_ids: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        min_length=1, max_length=MAX_BATCH_ITEMS
    )


class ForkRequest(_Request):
    """``POST /v1/sessions/{id}/fork`` (a local-node extension)."""

    count: int = Field(default=1, ge=1, le=MAX_FORK_COUNT)


class HealthResponse(_Response):
    """``GET /v1/health``.

    ``unavailable_templates`` (a local-node extension): built-in templates this node does
    not offer, and why, e.g. ``{"go": "`go` not found on the PATH (...)"}``.
    """

    status: Literal["ok", "draining"]
    sessions: int
    running: int
    max_inflight: int
    queued: int
    templates: list[str]
    unavailable_templates: dict[str, str] = {}
    version: str
    isolation: str


class SessionInfo(_Response):
    """One session, as listed by ``GET /v1/sessions``.

    ``egress`` (``GET /v1/sessions/{id}`` of a networked session only): the
    policy in force and the proxy's counters, ``{"policy": {...}, "allowed",
    "denied", "failed", "bytes_out", "bytes_in", "hosts": {host: {same
    counters}}}``.
    """

    session_id: str
    template_id: str
    age_secs: float
    idle_secs: float
    exec_count: int
    egress: dict[str, Any] | None = None


class CreateSessionResponse(_Response):
    """``POST /v1/sessions`` (201). ``fork_time_ms`` is ~0 on a warm-pool hit.

    ``endpoints`` (only for a template with a service): ``{"<port>":
    "127.0.0.1:<node port>"}``, no scheme, reachable from the node's host.
    """

    session_id: str
    template_id: str
    fork_time_ms: float
    create_time_ms: float
    endpoints: dict[str, str] | None = None


class ExecResponse(_Response):
    """An exec's result. Output is merged into ``stdout``; ``stderr`` is always empty."""

    stdout: str
    stderr: str = ""
    exit_code: int
    fork_time_ms: float
    exec_time_ms: float
    total_time_ms: float
    seed: str
    seed_ack: str
    id: str
    truncated: bool | None = Field(
        default=None, description="Present (true) only when the output hit the cap."
    )


class DeleteResponse(_Response):
    """``DELETE /v1/sessions/{id}``; the 404 form adds ``error``/``error_code``."""

    deleted: bool
    session_id: str
    error: str | None = None
    error_code: str | None = None


class ForkChild(_Response):
    """One child of a fork; ``id`` and ``session_id`` are the same."""

    id: str
    session_id: str
    template_id: str
    fork_time_ms: float
    create_time_ms: float


class ForkResponse(_Response):
    """``POST /v1/sessions/{id}/fork`` (201)."""

    parent: str
    children: list[ForkChild]


class ErrorResponse(_Response):
    """The contract's error envelope."""

    error: str
    error_code: str


class ReadySpec(_Request):
    """A bake's service, in the gateway's ReadySpec names (``network`` is the bake's own flag).

    With ``ports``, ``cmd`` is a server every session starts (and ``http`` a
    path polled until it answers before a create returns); without ports,
    nothing is served and ``cmd`` is one more setup command.

    >>> ReadySpec(cmd="python3 -m http.server 8000", ports=[8000]).ports
    [8000]
    """

    cmd: str = Field(default="", max_length=16384)
    http: str = Field(default="", max_length=2048, pattern=r"^(/[^\s]*)?$")
    http_timeout_s: float = Field(default=0, ge=0, le=3600)
    ports: list[Annotated[int, Field(ge=1, le=65535)]] = Field(default_factory=list, max_length=16)
    env: dict[str, str] = Field(default_factory=dict)


class BakeRequest(_Request):
    """``POST /v1/templates`` (local-node extension): freeze setup commands into a template.

    The commands are the operator's, not a model's: they run once, in a sandbox
    over ``base``, with network only when ``network`` is true, and their result
    becomes a read-only layer every session of the new template starts from.
    ``ready`` adds a service (see :class:`ReadySpec`) and environment; with it,
    ``setup`` may be empty. ``network`` also makes the new template networked
    (so does a networked ``base``); ``egress`` is its default policy (the
    gateway's ``EGRESS`` knob), which a per-session policy overrides.
    """

    template_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    base: str = Field(default="python3", min_length=1, max_length=256)
    setup: list[str] = Field(default_factory=list, max_length=64)
    network: bool = False
    ready: ReadySpec | None = None
    egress: Egress = None
    #: an image reference instead of ``base``: the image's root filesystem is every
    #: session's ``/`` (pulled into the node's image store; see node/image_templates.py);
    #: ``setup`` then runs in that root (the image's ``/bin/sh -c``, as its ``User``)
    image: str | None = Field(default=None, min_length=1, max_length=1024)


class BakeResponse(_Response):
    """The baked template."""

    template_id: str
    base: str
    bake_time_ms: float
    templates: list[str]
    image: str | None = None  # the canonical reference an image template was pulled as
