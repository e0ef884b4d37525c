"""Replay manifests: a recorded batch replays bit for bit; tampering shows up row by row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading import (
    IOReward,
    PropertyReward,
    ReplayRecorder,
    UnitTestReward,
    grade,
    grade_batch,
    replay,
)

from .conftest import TEMPLATE

PROPERTY = PropertyReward("return sum(x)", "[random.randint(0, 99) for _ in range(4)]", k=5)
COMPLETIONS = [
    "```python\ndef solve(x):\n    return sum(x)\n```",
    "```python\ndef solve(x):\n    return sum(x) if x[0] % 2 else 0\n```",
    "```python\ndef solve(x):\n    raise ValueError(x)\n```",
    "```python\nimport random\ndef solve(x):\n    return sum(x) + (random.random() < 2)\n```",
]


def test_a_recorded_batch_replays_identically(client: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "grades.jsonl"
    seed = "c4" * 32
    with ReplayRecorder(manifest) as recorder:
        results = grade_batch(
            client, TEMPLATE, COMPLETIONS, PROPERTY, seeds=seed, concurrency=2, recorder=recorder
        )
        io = IOReward([{"input": "3\n", "output": "6\n"}, {"input": "4\n", "output": "8\n"}])
        grade(client, TEMPLATE, "print(int(input()) * 2)", io, recorder=recorder, extract=False)
        assert recorder.rows_written == 5
    assert results[0].reward == 1.0 and 0 < results[1].reward < 1
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert {row["seed"] for row in rows[:4]} == {seed}
    assert rows[4]["seed"]  # drawn by the node, recorded as echoed
    assert {"template", "spec_digest", "completion_digest", "output_digest", "reward"} <= set(
        rows[0]
    )

    report = replay(client, manifest)
    assert report.ok, report.mismatches
    assert [row.replayed_reward for row in report.rows] == [row["reward"] for row in rows]


def test_replay_reports_mismatches_row_by_row(client: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    spec = UnitTestReward([{"input": [2], "expected": 4}], entry="double")
    with ReplayRecorder(manifest) as recorder:
        for body in ("return x * 2", "return x + 3"):
            grade(
                client,
                TEMPLATE,
                f"def double(x):\n    {body}\n",
                spec,
                recorder=recorder,
                extract=False,
            )
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[1]["reward"] = 1.0  # a doctored reward
    rows[0]["output_digest"] = "0" * 64  # a doctored verdict
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = replay(client, manifest)
    assert not report.ok
    assert (report.rows[0].reward_equal, report.rows[0].output_equal) == (True, False)
    assert (report.rows[1].reward_equal, report.rows[1].output_equal) == (False, True)


def test_a_row_says_which_harness_graded_it(client: Any, tmp_path: Path) -> None:
    from collimate_rl.grading._shipping import harness_digest

    manifest = tmp_path / "h.jsonl"
    spec = UnitTestReward([{"input": [2], "expected": 4}], entry="double", all_or_nothing=True)
    with ReplayRecorder(manifest) as recorder:
        for body in ("return x * 2", "return x + 3"):
            grade(client, TEMPLATE, f"def double(x):\n    {body}\n", spec, recorder=recorder)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert {row["harness"] for row in rows} == {harness_digest()}
    report = replay(client, manifest)
    assert report.ok and [r.harness_changed for r in report.rows] == [False, False]
    # a row from another harness version whose verdict differed; and one from before the field
    rows[1]["harness"] = "0" * 64
    rows[1]["output_digest"] = "1" * 64
    del rows[0]["harness"]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    first, second = replay(client, manifest).rows
    assert first.reproduced and first.harness_changed is None
    assert not second.reproduced and second.harness_changed is True


def test_digest_only_manifests_cannot_replay(fake: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "d.jsonl"
    spec = UnitTestReward([{"input": [2], "expected": 4}], entry="double")
    with ReplayRecorder(manifest, store_inputs=False) as recorder:
        grade(
            fake,
            TEMPLATE,
            "def double(x):\n    return 2 * x\n",
            spec,
            recorder=recorder,
            extract=False,
        )
    row = json.loads(manifest.read_text())
    assert "code" not in row and "spec" not in row and row["reward"] == 1.0
    report = replay(fake, manifest)
    assert not report.ok and report.rows[0].error


def test_bad_manifests_and_closed_recorders(fake: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"v": 99}\n')
    with pytest.raises(CollimateUsageError, match="version-1"):
        replay(fake, bad)
    recorder = ReplayRecorder(tmp_path / "r.jsonl")
    recorder.close()
    recorder.close()  # idempotent
    spec = UnitTestReward([{"input": [2], "expected": 4}], entry="double")
    with pytest.raises(CollimateUsageError, match="closed"):
        grade(fake, TEMPLATE, "def double(x):\n    return 2 * x\n", spec, recorder=recorder)
