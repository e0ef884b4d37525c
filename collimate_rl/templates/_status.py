"""A template's bake and pool status, and the error a failed bake raises."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from collimate_rl.errors import GatewayError
from collimate_rl.wire._operations import field_of, to_dict

__all__ = ["PHASE_RANK", "TemplateBakeFailed", "TemplateStatus"]

#: How far along a bake is; anything unknown (``Failed`` included) ranks 0.
PHASE_RANK: Final[Mapping[str, int]] = {
    "Pending": 0,
    "Converting": 1,
    "Distributing": 2,
    "Live": 3,
}


def _int(value: Any) -> int:
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


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
