"""Typed wire responses that still read like the contract's dicts.

Every response is a frozen dataclass with named, typed fields *and* read-only
mapping access to the full JSON object it came from (``.raw``), so both
``resp.stdout`` and ``resp["stdout"]`` work, unknown fields survive (e.g. the
local node's ``health()["isolation"]``), and ``resp == {...}`` compares the
JSON.

>>> r = ExecResponse.from_raw({"stdout": "hi\\n", "exit_code": 0, "seed": "ab" * 32})
>>> r.stdout, r["exit_code"], r.get("seed_ack"), "seed" in r, r.ok
('hi\\n', 0, None, True, True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

__all__ = [
    "ConnectURL",
    "CreateSessionResponse",
    "DeleteResponse",
    "ExecResponse",
    "ForkChild",
    "ForkResponse",
    "Health",
    "ImageInfo",
    "SessionInfo",
    "StateResponse",
    "TemplateInfo",
    "TemplateList",
    "Usage",
    "WireModel",
]

M = TypeVar("M", bound="WireModel")


def _coerce(value: Any, default: Any) -> Any:
    """Bring a JSON value to the type of the field's default; keep the default on None."""
    if value is None:
        return default
    if isinstance(default, bool):
        return bool(value)
    try:
        if isinstance(default, float):
            return float(value)
        if isinstance(default, int):
            return int(value)
    except (TypeError, ValueError):
        return default
    if isinstance(default, tuple):
        return tuple(value) if isinstance(value, (list, tuple)) else default
    if isinstance(default, dict):
        return dict(value) if isinstance(value, Mapping) else default
    return value


def _default(f: dataclasses.Field[Any]) -> Any:
    if callable(f.default_factory):
        return f.default_factory()
    return f.default


@dataclass(frozen=True, eq=False)
class WireModel(Mapping[str, Any]):
    """Base of the typed responses: fields plus mapping access to ``raw``.

    Equality compares the JSON (``raw``), so a model equals the dict it came from.

    >>> DeleteResponse.from_raw({"deleted": True, "session_id": "s1"}) == {
    ...     "deleted": True, "session_id": "s1"}
    True
    """

    raw: dict[str, Any] = field(default_factory=dict, repr=False, kw_only=True)

    #: field name -> JSON key, where they differ.
    _keys: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_raw(cls: type[M], raw: Mapping[str, Any]) -> M:
        """Build from a decoded JSON object; missing fields take their defaults."""
        data = dict(raw) if isinstance(raw, Mapping) else {}
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "raw":
                continue
            key = cls._keys.get(f.name, f.name)
            if key in data:
                kwargs[f.name] = _coerce(data[key], _default(f))
        return cls(**kwargs, raw=data)

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)


@dataclass(frozen=True, eq=False)
class Health(WireModel):
    """``GET /v1/health``.

    >>> h = Health.from_raw({"status": "draining", "templates": ["py"], "isolation": "bwrap"})
    >>> h.draining, h.templates, h["isolation"]
    (True, ('py',), 'bwrap')
    """

    status: str = ""
    sessions: int = 0
    running: int = 0
    max_inflight: int = 0
    queued: int = 0
    templates: tuple[str, ...] = ()
    version: str = ""

    @property
    def draining(self) -> bool:
        """The node is draining: send new work elsewhere."""
        return self.status == "draining"

    @property
    def unavailable_templates(self) -> dict[str, str]:
        """Built-in templates the node does not offer, and why (the local node says; ``{}``)."""
        raw = self.raw.get("unavailable_templates")
        return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


class TemplateList(list[str]):
    """``templates()``: the template ids, a plain list, plus why others are missing.

    ``unavailable`` maps a built-in template the node does not offer to the reason, such as
    the binary it did not find (``{"go": "`go` not found on the PATH (...)"}``); it is empty
    from a node that does not report it.

    >>> ids = TemplateList(["python3", "cpp"], {"go": "`go` not found on the PATH"})
    >>> ids == ["python3", "cpp"], ids.unavailable["go"]
    (True, '`go` not found on the PATH')
    """

    def __init__(
        self, ids: Iterable[str] = (), unavailable: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(ids)
        self.unavailable: dict[str, str] = dict(unavailable or {})


@dataclass(frozen=True, eq=False)
class SessionInfo(WireModel):
    """One session (daemon) or sandbox (gateway, with ``session_id``/``template_id`` aliases).

    >>> SessionInfo.from_raw({"session_id": "s1", "template_id": "py", "exec_count": 2}).exec_count
    2
    """

    session_id: str = ""
    template_id: str = ""
    age_secs: float = 0.0
    idle_secs: float = 0.0
    exec_count: int = 0
    #: a networked session's policy and counters on the local node (``GET`` of one session)
    egress: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class CreateSessionResponse(WireModel):
    """``POST /v1/sessions`` (or gateway ``POST /v1/sandboxes``, where ``session_id == id``).

    ``session_id`` is ``None`` if the server did not return one (the clone may
    then leak; callers must treat that as an error).

    >>> r = CreateSessionResponse.from_raw({"session_id": "s1", "template_id": "py",
    ...                                     "fork_time_ms": 0.4})
    >>> r.session_id, r.fork_time_ms, r.create_time_ms, r.endpoints
    ('s1', 0.4, -1.0, {})
    """

    session_id: str | None = None
    template_id: str = ""
    fork_time_ms: float = -1.0
    create_time_ms: float = -1.0
    endpoints: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class ExecResponse(WireModel):
    """An exec's result. ``stderr`` is always ``""``: the guest merges it into stdout.

    A guest timeout is data, not an error: ``exit_code == -1``.

    >>> ExecResponse.from_raw({"stdout": "timeout after 1.0s", "exit_code": -1}).ok
    False
    """

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    fork_time_ms: float = -1.0
    exec_time_ms: float = -1.0
    total_time_ms: float = -1.0
    seed: str | None = None
    seed_ack: str | None = None

    @property
    def ok(self) -> bool:
        """The command exited with status 0."""
        return self.exit_code == 0


@dataclass(frozen=True, eq=False)
class DeleteResponse(WireModel):
    """A delete's result; ``deleted`` is False when nothing was deleted or the call failed.

    >>> DeleteResponse.from_raw({"deleted": False, "session_id": "s1"}).deleted
    False
    """

    deleted: bool = False
    session_id: str = ""


@dataclass(frozen=True, eq=False)
class ForkChild(WireModel):
    """One child of a fork; ``session_id`` is always set (``== id``)."""

    id: str = ""
    session_id: str = ""
    template_id: str = ""
    fork_time_ms: float = -1.0
    create_time_ms: float = -1.0
    endpoints: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class ForkResponse(WireModel):
    """A fork's result: the parent id and the children, in order.

    >>> r = ForkResponse.build("p", [{"id": "c1"}, {"id": "c2"}])
    >>> [c.session_id for c in r.children], r["children"][0]["session_id"]
    (['c1', 'c2'], 'c1')
    """

    parent: str = ""
    children: tuple[ForkChild, ...] = ()

    @classmethod
    def build(cls, parent: str, children: Sequence[Mapping[str, Any]]) -> ForkResponse:
        """Build from child dicts, adding ``session_id``/``id`` aliases to each."""
        rows = []
        for child in children:
            row = dict(child)
            row.setdefault("session_id", row.get("id", ""))
            row.setdefault("id", row["session_id"])
            rows.append(row)
        return cls(
            parent=parent,
            children=tuple(ForkChild.from_raw(r) for r in rows),
            raw={"parent": parent, "children": rows},
        )

    @property
    def session_ids(self) -> list[str]:
        """The children's session ids, in order."""
        return [c.session_id for c in self.children]


@dataclass(frozen=True, eq=False)
class ImageInfo(WireModel):
    """A row of the gateway's image catalog (``visibility == "public"`` is shared)."""

    id: str = ""
    name: str = ""
    image: str = ""
    visibility: str = ""
    tier: str = ""
    description: str = ""


@dataclass(frozen=True, eq=False)
class TemplateInfo(WireModel):
    """A gateway template: the create response, a list row or a full status."""

    id: str = ""
    name: str = ""
    image: str = ""
    phase: str = ""
    visibility: str = ""
    bake_mode: str = ""
    declared: int = 0
    warm: int = 0
    frozen: int = 0
    converge_state: str = ""
    error: str = ""
    build_fails: int = 0


@dataclass(frozen=True, eq=False)
class StateResponse(WireModel):
    """A gateway state change (suspend, resume, expect, release)."""

    id: str = ""
    state: str = ""


@dataclass(frozen=True, eq=False)
class ConnectURL(WireModel):
    """A minted host->guest connect URL and its expiry (RFC 3339)."""

    url: str = ""
    expires_at: str = ""


@dataclass(frozen=True, eq=False)
class Usage(WireModel):
    """Gateway usage over a window (``from``/``to`` are RFC 3339)."""

    from_ts: str = ""
    to_ts: str = ""
    totals: dict[str, Any] = field(default_factory=dict)

    _keys: ClassVar[dict[str, str]] = {"from_ts": "from", "to_ts": "to"}
