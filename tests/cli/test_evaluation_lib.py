"""The evaluation library without a node: reading completions, the results log, reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collimate_rl.errors import CollimateUsageError
from collimate_rl.evaluation import (
    Completion,
    EvalReport,
    ResultsLog,
    TaskTally,
    evaluate,
    read_completions,
)

from . import _samples

GOOD = '{"task_id": "basic/count-vowels", "completion": "x = 1"}\n'


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (GOOD + "{not json\n", r"samples.jsonl:2: invalid JSON"),
        (GOOD + "\n[1, 2]\n", r"samples.jsonl:3: expected a JSON object, got list"),
        ('{"completion": "x"}\n', r"samples.jsonl:1: missing key 'task_id'"),
        ('{"task_id": "t"}\n', r"samples.jsonl:1: missing key 'completion'"),
        ('{"task_id": 7, "completion": "x"}\n', r"samples.jsonl:1: 'task_id' must be a string"),
        ('{"task_id": "", "completion": "x"}\n', r"samples.jsonl:1: 'task_id' is empty"),
        ("\n\n", r"no completions in the file"),
    ],
)
def test_malformed_completions_name_the_line(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CollimateUsageError, match=match):
        read_completions(path)


def test_reading_keeps_order_lines_and_ignores_extra_keys(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text(
        GOOD + "\n" + '{"task_id": "b", "completion": "y", "model": "m"}\n', encoding="utf-8"
    )
    assert read_completions(path) == [
        Completion("basic/count-vowels", "x = 1", 1),
        Completion("b", "y", 3),
    ]


def test_missing_completions_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_completions(tmp_path / "nope.jsonl")


def test_unknown_task_id_fails_before_any_grading(tmp_path: Path) -> None:
    path = _samples.write(
        tmp_path / "s.jsonl",
        [*_samples.rows(((1, 0),)), {"task_id": "basic/nope", "completion": ""}],
    )
    # client=object(): nothing may be sent before the input is validated.
    with pytest.raises(CollimateUsageError, match=r"line 2: no task 'basic/nope'"):
        evaluate(path, task_set="collimate-basic", client=object())


@pytest.mark.parametrize("ks", [(), (0,), (1, "2")])
def test_bad_ks(ks: tuple[object, ...]) -> None:
    with pytest.raises(CollimateUsageError, match="k"):
        evaluate(_samples.rows(((1, 0),)), task_set="collimate-basic", ks=ks, client=object())  # type: ignore[arg-type]


def test_log_drops_a_torn_last_line_and_keeps_a_complete_one(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultsLog.open(path, {"task_set": "x"}) as log:
        log.append({"index": 0, "digest": "a", "correct": True})
    with path.open("a") as fh:
        fh.write('{"index": 1, "digest": "b", "corr')  # a kill mid-write
    with ResultsLog.open(path, {"task_set": "x"}) as log:
        assert sorted(log.done) == [0]
        log.append({"index": 1, "digest": "b", "correct": False})
    with path.open("a") as fh:
        fh.write('{"index": 2, "digest": "c", "correct": true}')  # complete, newline lost
    with ResultsLog.open(path, {"task_set": "x"}) as log:
        assert sorted(log.done) == [0, 1, 2]
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_log_refuses_other_settings_and_foreign_files(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    ResultsLog.open(path, {"task_set": "x", "template": "python3"}).close()
    with pytest.raises(CollimateUsageError, match=r"different settings \(template\)"):
        ResultsLog.open(path, {"task_set": "x", "template": "py"})
    other = tmp_path / "other.jsonl"
    other.write_text('{"some": "thing"}\n')
    with pytest.raises(CollimateUsageError, match="not a collimate eval output"):
        ResultsLog.open(other, {"task_set": "x"})
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text('{"collimate_eval": 1, "task_set": "x"}\n{"index": "zero"}\n{"index": 1}\n')
    with pytest.raises(CollimateUsageError, match=r"damaged.jsonl:2: not an eval result row"):
        ResultsLog.open(damaged, {"task_set": "x"})


def test_report_counts_and_json() -> None:
    tallies = [
        TaskTally("a", n=5, correct=3),
        TaskTally("b", n=1, correct=1, infra_errors=2),
        TaskTally("c", n=0, correct=0, pending=4),
    ]
    report = EvalReport.build(task_set="demo", ks=(1, 2), completions=12, tallies=tallies)
    # pass@1 over a and b (c has no graded sample); pass@2 over a only.
    assert report.pass_at_k == {1: pytest.approx((0.6 + 1.0) / 2), 2: pytest.approx(0.9)}
    assert report.tasks_counted == {1: 2, 2: 1}
    assert (report.graded, report.correct, report.pending, report.complete) == (6, 4, 4, False)
    data = json.loads(report.to_json())
    assert data["pass_at_k"]["pass@2"] == pytest.approx(0.9)
    assert data["tasks"][1] == {
        "task_id": "b",
        "n": 1,
        "correct": 1,
        "infra_errors": 2,
        "pending": 0,
    }


def test_log_is_held_by_one_run_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with (
        ResultsLog.open(path, {"task_set": "x"}),
        pytest.raises(CollimateUsageError, match="another eval run"),
    ):
        ResultsLog.open(path, {"task_set": "x"})
    ResultsLog.open(path, {"task_set": "x"}).close()  # free again once closed
