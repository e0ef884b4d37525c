"""Replay manifests: record every grade, re-run them, compare bit for bit.

A manifest is JSONL, one row per grade::

    {"v": 1, "template": ..., "spec": {...}, "spec_digest": ..., "code": ...,
     "code_digest": ..., "completion_digest": ..., "seed": ..., "seed_ack": ...,
     "timeout_seconds": ..., "reward": ..., "passed": ..., "total": ...,
     "exit_code": ..., "output_digest": ..., "fork_time_ms": ...,
     "exec_time_ms": ..., "total_time_ms": ..., "harness": ..., "egress": {...}}

``spec`` and ``code`` (the extracted program) are what :func:`replay` re-runs;
``egress`` (present when the grade gave one) is the policy it ran under, and
the replay runs under it again;
with ``store_inputs=False`` only digests are kept and rows cannot be replayed.
``seed`` is the seed the exec actually used, so a replay draws the same
inputs. ``output_digest`` is the digest of the harness's verdict without its
nonce; ``harness`` the digest of the grading harness that gave it. A replay
under another harness (a newer collimate-rl) may give another verdict for the
same program, e.g. a test reported as not run; its row says so
(``ReplayRow.harness_changed``), and rows recorded before the field existed
say ``None``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading._shipping import harness_digest
from collimate_rl.grading.grade import grade
from collimate_rl.grading.result import GradeResult
from collimate_rl.grading.specs import RewardSpec, spec_from_dict

__all__ = ["MANIFEST_VERSION", "ReplayRecorder", "ReplayReport", "ReplayRow", "replay"]

MANIFEST_VERSION = 1


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


class ReplayRecorder:
    """Append one JSONL row per grade (thread-safe). Use as ``grade(..., recorder=rec)``.

    >>> import tempfile, os
    >>> folder = tempfile.TemporaryDirectory()
    >>> with ReplayRecorder(os.path.join(folder.name, "m.jsonl")) as rec:
    ...     rec.rows_written
    0
    >>> folder.cleanup()
    """

    def __init__(self, path: str | os.PathLike[str], *, store_inputs: bool = True) -> None:
        self.path = Path(path)
        self.store_inputs = store_inputs
        self.rows_written = 0
        self._lock = threading.Lock()
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")

    def record(
        self,
        template: str,
        spec: RewardSpec,
        completion: str,
        code: str,
        timeout_seconds: float,
        result: GradeResult,
        *,
        egress: Mapping[str, Any] | None = None,
    ) -> None:
        """Append the row for one grade (``egress``: the policy it ran under, if given)."""
        row: dict[str, Any] = {
            "v": MANIFEST_VERSION,
            "template": template,
            "spec_digest": spec.digest(),
            "completion_digest": _sha(completion),
            "code_digest": _sha(code),
            "seed": result.seed,
            "seed_ack": result.seed_ack,
            "timeout_seconds": timeout_seconds,
            "reward": result.reward,
            "passed": result.passed,
            "total": result.total,
            "exit_code": result.exit_code,
            "output_digest": result.output_digest,
            "fork_time_ms": result.fork_time_ms,
            "exec_time_ms": result.exec_time_ms,
            "total_time_ms": result.total_time_ms,
            "harness": harness_digest(),
        }
        if egress is not None:
            row["egress"] = dict(egress)
        if self.store_inputs:
            row["spec"] = spec.to_dict()
            row["code"] = code
        line = json.dumps(row, sort_keys=True) + "\n"
        with self._lock:
            if self._file is None:
                raise CollimateUsageError(f"the replay recorder for {self.path} is closed")
            self._file.write(line)
            self._file.flush()
            self.rows_written += 1

    def close(self) -> None:
        """Close the manifest (idempotent)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> ReplayRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class ReplayRow:
    """One manifest row, replayed.

    ``reproduced`` is true when the reward is identical and the verdict's
    digest is identical (bit for bit). ``harness_changed``: the row was graded
    by another version of the grading harness than this replay (``None``: the
    row does not say), the first suspect when a verdict differs.
    """

    index: int
    reward: float | None
    replayed_reward: float | None
    reward_equal: bool
    output_equal: bool
    seed: str | None
    error: str | None = None
    harness_changed: bool | None = None

    @property
    def reproduced(self) -> bool:
        return self.reward_equal and self.output_equal and self.error is None


@dataclasses.dataclass(frozen=True)
class ReplayReport:
    """Row-by-row replay results."""

    rows: tuple[ReplayRow, ...]

    @property
    def ok(self) -> bool:
        """Every row reproduced."""
        return all(row.reproduced for row in self.rows)

    @property
    def mismatches(self) -> tuple[ReplayRow, ...]:
        return tuple(row for row in self.rows if not row.reproduced)


def _read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise CollimateUsageError(f"{path}:{number}: not a manifest row: {exc}") from None
            if not isinstance(row, dict) or row.get("v") != MANIFEST_VERSION:
                raise CollimateUsageError(
                    f"{path}:{number}: expected a version-{MANIFEST_VERSION} manifest row"
                )
            rows.append(row)
    return rows


def replay(client: Any, manifest_path: str | os.PathLike[str]) -> ReplayReport:
    """Re-run every row of a manifest with its recorded seed and compare.

    Infrastructure errors raise (a replay that could not run proves nothing);
    rows recorded without inputs are reported with an ``error``.
    """
    out = []
    harness = harness_digest()
    for index, row in enumerate(_read_rows(manifest_path)):
        if "spec" not in row or "code" not in row:
            out.append(
                ReplayRow(
                    index,
                    row.get("reward"),
                    None,
                    False,
                    False,
                    row.get("seed"),
                    error="recorded without inputs (store_inputs=False)",
                )
            )
            continue
        spec = spec_from_dict(row["spec"])
        result = grade(
            client,
            row["template"],
            row["code"],
            spec,
            seed=row.get("seed"),
            timeout_seconds=float(row.get("timeout_seconds", 30.0)),
            extract=False,
            egress=row.get("egress"),
        )
        out.append(
            ReplayRow(
                index=index,
                reward=row.get("reward"),
                replayed_reward=result.reward,
                reward_equal=result.reward == row.get("reward"),
                output_equal=result.output_digest == row.get("output_digest"),
                seed=row.get("seed"),
                harness_changed=None if "harness" not in row else row["harness"] != harness,
            )
        )
    return ReplayReport(tuple(out))
