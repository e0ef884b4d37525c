"""``grade`` (one completion against one task) and ``replay`` (re-run a manifest)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from collimate_rl.cli._exec import read_source
from collimate_rl.cli._output import FAILED, OK, Output
from collimate_rl.cli._target import open_client
from collimate_rl.grading import GradeResult, ReplayRecorder, grade, replay

__all__ = ["grade_command", "register", "replay_command"]


def _verdict(result: GradeResult) -> str:
    word = "PASS" if result.ok else "FAIL"
    line = f"{word}  {result.passed}/{result.total} tests  reward {result.reward:.3f}"
    return line + (f"  ({result.error})" if result.error else "")


def _num(value: Any) -> Any:
    return f"{value:.4f}" if isinstance(value, float) else value


def grade_command(args: argparse.Namespace, out: Output) -> int:
    """Grade one completion; exit 0 when every test passed, 1 otherwise."""
    from collimate_envs.tasks import load_task_set

    task = load_task_set(args.task_set).get(args.task)
    completion = read_source(args.completion)
    spec = task.to_reward_spec()
    with open_client(args, out.note) as client:
        recorder = ReplayRecorder(args.manifest) if args.manifest else None
        try:
            result = grade(
                client,
                args.template,
                completion,
                spec,
                seed=args.seed,
                timeout_seconds=args.timeout,
                extract=not args.raw,
                recorder=recorder,
            )
        finally:
            if recorder is not None:
                recorder.close()
    if out.json_mode:
        out.emit_json({"task_id": task.task_id, "ok": result.ok, **dataclasses.asdict(result)})
    else:
        out.print(f"{task.task_id}: {_verdict(result)}")
        failing = [t for t in result.tests if t.status != "pass"]
        if failing:
            rows = [(t.name, t.status, t.detail) for t in failing]
            out.table(("test", "status", "detail"), rows, title="tests not passed")
        if result.total == 0 and result.output_tail:
            out.print(result.output_tail)
    return OK if result.ok else FAILED


def replay_command(args: argparse.Namespace, out: Output) -> int:
    """Re-run a manifest's grades with their seeds; exit 0 only if all reproduced."""
    if not Path(args.manifest).is_file():
        raise FileNotFoundError(f"manifest {args.manifest!r} does not exist")
    with open_client(args, out.note) as client:
        report = replay(client, args.manifest)
    rows = [dataclasses.asdict(r) | {"reproduced": r.reproduced} for r in report.rows]
    summary = {
        "rows": len(report.rows),
        "reproduced": sum(r.reproduced for r in report.rows),
        "mismatched": len(report.mismatches),
        "mismatched_under_another_harness": sum(
            r.harness_changed is True for r in report.mismatches
        ),
        "ok": report.ok,
    }
    if out.json_mode:
        out.emit_json(summary | {"results": rows})
    else:
        table = [
            (
                r["index"],
                r["reward"],
                r["replayed_reward"],
                "yes" if r["reproduced"] else "NO",
                r["error"],
            )
            for r in rows
        ]
        out.table(("row", "reward", "replayed", "reproduced", "error"), table, title="replay")
        out.print(
            f"{summary['reproduced']}/{summary['rows']} reproduced, {summary['mismatched']} mismatched"
        )
        if summary["mismatched_under_another_harness"]:
            out.print(
                f"{summary['mismatched_under_another_harness']} of the mismatched rows were graded "
                "by another version of the grading harness (a newer collimate-rl may report "
                "tests differently)"
            )
    return OK if report.ok else FAILED


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``grade`` and ``replay`` to the ``collimate`` sub-parsers."""
    p = sub.add_parser(
        "grade",
        parents=[common],
        help="grade one completion against a task",
        description="Grade one completion against one task (exit 0 if every test passed, 1 if not).",
    )
    p.add_argument("--task-set", required=True, help="a task set name or a task file path")
    p.add_argument("--task", required=True, metavar="ID", help="the task id")
    p.add_argument(
        "--completion", required=True, metavar="FILE", help="the completion text ('-' reads stdin)"
    )
    p.add_argument("--raw", action="store_true", help="the completion is code: no extraction")
    p.add_argument("--template", default="python3", help="the template (default python3)")
    p.add_argument("--timeout", type=float, default=30.0, help="exec timeout in seconds")
    p.add_argument("--seed", metavar="HEX", help="64 hex characters (default: fresh)")
    p.add_argument("--manifest", metavar="PATH", help="append a replay row to this manifest")
    p.set_defaults(run=grade_command)
    p = sub.add_parser(
        "replay",
        parents=[common],
        help="re-run a replay manifest and report reproduction",
        description="Re-run every row of a replay manifest (from grade/eval --manifest or "
        "grade_batch(recorder=...)) with its recorded seed; exit 1 if any row did not reproduce.",
    )
    p.add_argument("manifest", help="the manifest JSONL")
    p.set_defaults(run=replay_command)
