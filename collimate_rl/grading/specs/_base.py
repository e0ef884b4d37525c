"""The ``RewardSpec`` base: build the exec, read and score its verdict, describe the spec.

Also the checks every concrete spec shares.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
import math
import re
import secrets
from collections.abc import Mapping
from typing import Any, ClassVar

from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading import _codec
from collimate_rl.grading._shipping import full_program, warm_stub
from collimate_rl.grading.specs._frame import RESULT_PREFIX, Frame, Program, _frame_from_json

__all__ = ["DEFAULT_PER_TEST_TIMEOUT", "RewardSpec"]

DEFAULT_PER_TEST_TIMEOUT = 6.0


def _budget(timeout_seconds: float) -> float:
    # Leave the harness time to kill the candidate and print its frame before
    # the exec's own timeout hits.
    margin = min(2.0, max(0.5, 0.2 * timeout_seconds))
    return max(0.2, timeout_seconds - margin)


def _usage(message: str) -> CollimateUsageError:
    return CollimateUsageError(message)


def _check_timeout(value: float) -> None:
    if not value > 0:
        raise _usage(f"per_test_timeout must be positive, not {value!r}")


def _case_field(case: Mapping[str, Any], names: tuple[str, ...], what: str) -> Any:
    for name in names:
        if name in case:
            return case[name]
    raise _usage(f"each case needs {what} (one of {', '.join(map(repr, names))}), not {case!r:.80}")


class RewardSpec(abc.ABC):
    """How to grade a candidate: build the program, read its verdict.

    Subclasses are frozen dataclasses; :meth:`to_dict` / :func:`spec_from_dict`
    round-trip them (the replay manifest stores specs that way).
    """

    interpreter: ClassVar[str] = "python3"
    kind: ClassVar[str]

    # Every concrete spec has these dataclass fields.
    per_test_timeout: float
    all_or_nothing: bool

    @property
    def extract_entry(self) -> str | None:
        """The name :func:`extract_code` should prefer a block for."""
        return getattr(self, "entry", None)

    @abc.abstractmethod
    def _payload(self, source: str) -> dict[str, Any]:
        """The kind-specific part of the harness payload."""

    def build(
        self, candidate: str, *, nonce: str | None = None, timeout_seconds: float = 30.0
    ) -> Program:
        """Compose the exec for ``candidate`` (its source code).

        Args:
            candidate: the program to grade (already extracted).
            nonce: the secret the harness stamps on its result frame; pass the
                same value to :meth:`read_frame`. Default: a fresh one, which
                only :meth:`parse` (nonce-agnostic) can then read.
            timeout_seconds: the exec's timeout; the harness keeps a margin so
                it can always print its frame.
        """
        nonce = nonce or secrets.token_hex(16)
        payload = {"source": candidate, **self._payload(candidate)}  # a spec may rewrite it
        payload.update(
            v=1,
            kind=self.kind,
            nonce=nonce,
            per_test_timeout=float(self.per_test_timeout),
            budget_seconds=_budget(float(timeout_seconds)),
        )
        if self.all_or_nothing and self.kind != "custom":
            # the first failing test decides the reward: the harness runs no more
            payload["stop_on_failure"] = True
        path = f"/tmp/colgrade_{secrets.token_hex(8)}.json"
        files = [{"path": path, "content": json.dumps(payload)}]
        return Program(code=full_program(path), files=files, warm_code=warm_stub(path))

    @staticmethod
    def read_frame(output: str, nonce: str) -> Frame | None:
        """The verdict stamped with ``nonce`` in ``output``, or ``None``.

        Only the harness knows the nonce, so lines printed by anything else
        (including a candidate that somehow reached the exec's stdout) are
        ignored.
        """
        marker = f"{RESULT_PREFIX} {nonce} "
        for line in reversed(output.splitlines()):
            if line.startswith(marker):
                return _frame_from_json(line[len(marker) :])
        return None

    def reward_of(self, frame: Frame) -> float:
        """The reward a frame is worth under this spec (fraction or all-or-nothing)."""
        if frame.error and frame.total == 0:
            return 0.0
        if frame.reward is not None:
            value = frame.reward
        else:
            value = frame.passed / frame.total if frame.total else 0.0
        if self.all_or_nothing:
            return 1.0 if value >= 1.0 else 0.0
        return value

    def parse(self, stdout: str) -> float:
        """The reward in ``stdout`` (nonce-agnostic; kept for the 0.8.0 contract).

        Reads the last result frame if there is one; otherwise the last
        non-blank line as a bare float clamped to [0, 1] (0.0 if it is not a
        number). :func:`~collimate_rl.grading.grade` does not use this: it
        trusts only frames carrying its own nonce.
        """
        pattern = re.compile(rf"^{RESULT_PREFIX} [0-9a-f]+ (.*)$")
        for line in reversed(stdout.splitlines()):
            found = pattern.match(line)
            if found:
                frame = _frame_from_json(found.group(1))
                return self.reward_of(frame) if frame else 0.0
        for line in reversed(stdout.splitlines()):
            if line.strip():
                try:
                    value = float(line.strip())
                except ValueError:
                    return 0.0
                return 0.0 if math.isnan(value) else max(0.0, min(1.0, value))
        return 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (values through the codec, so tuples survive)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return {"type": type(self).__name__, "fields": _codec.encode(fields)}

    def digest(self) -> str:
        """sha256 of :meth:`to_dict` (stable for equal specs)."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
