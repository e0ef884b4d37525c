"""The result of one exec, as a frozen dataclass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from collimate_rl.wire._operations import field_of, to_dict

__all__ = ["ExecResult"]


def _float(value: Any, default: float = -1.0) -> float:
    try:
        return float(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class ExecResult:
    """What one exec returned. A non-zero exit is data, not an exception.

    Attributes:
        stdout: the merged stdout+stderr transcript (the daemon merges them).
        stderr: always ``""`` on the daemon; kept for shape compatibility.
        exit_code: the exit code; ``-1`` means the guest timeout fired.
        fork_time_ms: ms to fork the clone (``-1`` when not reported).
        exec_time_ms: ms the exec ran (``-1`` when not reported).
        total_time_ms: ms end to end on the server (``-1`` when not reported).
        seed: the seed actually used (echoed by the server).
        seed_ack: how the guest acknowledged the seed (``"verified"``, ``"off"``, ...).
        raw: the whole response as a dict.

    >>> r = ExecResult.from_response({"stdout": "hi\\n", "exit_code": 0, "seed": "ab" * 32})
    >>> r.ok, r.stdout, r.exec_time_ms
    (True, 'hi\\n', -1.0)
    >>> ExecResult.from_response({"stdout": "timeout after 1.0s", "exit_code": -1}).ok
    False
    """

    stdout: str
    stderr: str = ""
    exit_code: int = 0
    fork_time_ms: float = -1.0
    exec_time_ms: float = -1.0
    total_time_ms: float = -1.0
    seed: str | None = None
    seed_ack: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Whether the exec exited 0."""
        return self.exit_code == 0

    @classmethod
    def from_response(cls, resp: Any) -> ExecResult:
        """Build from an ExecResponse (a dict or a typed response with dict access).

        Missing fields default: ``exit_code`` 0, times ``-1``, strings ``""``.
        """
        exit_code = field_of(resp, "exit_code", 0)
        return cls(
            stdout=str(field_of(resp, "stdout", "") or ""),
            stderr=str(field_of(resp, "stderr", "") or ""),
            exit_code=int(exit_code) if exit_code is not None else 0,
            fork_time_ms=_float(field_of(resp, "fork_time_ms")),
            exec_time_ms=_float(field_of(resp, "exec_time_ms")),
            total_time_ms=_float(field_of(resp, "total_time_ms")),
            seed=_opt_str(field_of(resp, "seed")),
            seed_ack=_opt_str(field_of(resp, "seed_ack")),
            raw=to_dict(resp),
        )
