"""One grade prepared: the code extracted from the completion, the spec's exec built (no I/O)."""

from __future__ import annotations

import dataclasses
import math
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading._binding import bind_language, extract_source
from collimate_rl.grading.specs import Program, RewardSpec

Extract = bool | Callable[[str], str]

_SEED = re.compile(r"[0-9a-fA-F]{64}")


@dataclasses.dataclass(frozen=True)
class _Job:
    """One prepared grade (everything but the I/O)."""

    template: str
    spec: RewardSpec
    completion: str
    source: str
    program: Program
    nonce: str
    seed: str | None
    timeout_seconds: float
    session_id: str | None
    egress: Mapping[str, Any] | None = None

    def request(self, warm: bool = False) -> dict[str, Any]:
        return {
            "code": self.program.warm_code
            if warm and self.program.warm_code
            else self.program.code,
            "files": self.program.files,
            "timeout_seconds": max(1, math.ceil(self.timeout_seconds)),
            "seed": self.seed,
        }


def _prepare(
    template: str,
    completion: str,
    spec: RewardSpec,
    *,
    seed: str | None,
    timeout_seconds: float,
    session_id: str | None,
    extract: Extract,
    egress: Mapping[str, Any] | None = None,
) -> _Job:
    if not isinstance(spec, RewardSpec):
        raise CollimateUsageError(f"spec must be a RewardSpec, not {type(spec).__name__}")
    if not isinstance(completion, str):
        raise CollimateUsageError(f"completion must be text, not {type(completion).__name__}")
    if seed is not None and not (isinstance(seed, str) and _SEED.fullmatch(seed)):
        raise CollimateUsageError(f"seed must be 64 hex characters or None, not {seed!r}")
    if not timeout_seconds > 0:
        raise CollimateUsageError(f"timeout_seconds must be positive, not {timeout_seconds!r}")
    if egress is not None and session_id is not None:
        raise CollimateUsageError(
            "egress applies to one-shot grades; a session's policy is set when it is created"
        )
    spec = bind_language(spec, template)  # the template's language, if the spec names none
    if extract is True:
        source = extract_source(spec, completion)
    elif extract is False:
        source = completion
    else:
        source = extract(completion)
    nonce = secrets.token_hex(16)
    program = spec.build(source, nonce=nonce, timeout_seconds=timeout_seconds)
    return _Job(
        template,
        spec,
        completion,
        source,
        program,
        nonce,
        seed,
        timeout_seconds,
        session_id,
        dict(egress) if egress is not None else None,
    )
