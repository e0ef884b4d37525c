"""GRPO group throughput: the isolated group vector env against unisolated graders, same rollouts.

One run per task set, side by side:

* the vector env, ``gymnasium.make_vec("collimate/Code-v0", num_envs=G*K, group_size=K,
  task_set=...)`` on the benchmark's local node: forked sandboxes, seccomp, the grading oracle.
  Reported for ``step`` alone and for ``reset + step`` (a fresh group of forks per episode);
* ``grade()`` one-shot per rollout on the same node (``POST /v1/exec``: a fresh session each);
* skyrl-gym's own ``lcb`` env on the same rollouts (its grader forks a ``multiprocessing``
  manager and a process per rollout; no isolation beyond monkeypatching ``os``);
* ``bwrap --unshare-all ... python -S`` per rollout running the plain test program: what a
  user would script to isolate a grader (namespaces; no seccomp, no oracle);
* a fresh ``python -S`` per rollout running the plain test program, no isolation;
* the floor: the plain test program in a fork of a warm interpreter, no isolation.

Every runner grades exactly the (task, completion) pairs the vector env drew and graded. The
vector env and the floor take turns, episode by episode (:func:`run_env_and_floor`), so the
machine's drift over seconds is in both of the rates the targets compare.
CPU per rollout comes from a :class:`~collimate_rl.bench.cpu.CpuMeter` (client, node and
sandboxes when it is a cpuacct cgroup).

>>> RUNNERS[0], RUNNERS[-1]
('collimate vector env (isolated): step', 'warm fork per rollout (no isolation): floor')
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collimate_rl.bench.baselines import BwrapClient, SubprocessClient, WarmForkClient
from collimate_rl.bench.cpu import CpuMeter
from collimate_rl.bench.report import Section, fmt, pct_text, times_text
from collimate_rl.bench.stats import batch_rate, ratio
from collimate_rl.bench.workload import Rollout, group_completions, lcb_case, plain_program

__all__ = [
    "BWRAP",
    "ENV_EPISODE",
    "ENV_STEP",
    "FLOOR",
    "GRADE_ONESHOT",
    "RUNNERS",
    "SKYRL",
    "SUBPROCESS",
    "EnvRun",
    "RunnerResult",
    "combined",
    "grpo_section",
    "open_vector_env",
    "run_env_and_floor",
    "run_episodes",
    "run_grade_oneshot",
    "run_program_runner",
    "run_skyrl_lcb",
    "run_vector_env",
]

ENV_STEP = "collimate vector env (isolated): step"
ENV_EPISODE = "collimate vector env (isolated): reset + step"
GRADE_ONESHOT = "collimate grade() one-shot per rollout (isolated)"
SKYRL = "skyrl-gym lcb grader (no isolation)"
BWRAP = "bwrap + python -S per rollout (namespaces)"
SUBPROCESS = "subprocess python -S per rollout (no isolation)"
FLOOR = "warm fork per rollout (no isolation): floor"
RUNNERS = (ENV_STEP, ENV_EPISODE, GRADE_ONESHOT, SKYRL, BWRAP, SUBPROCESS, FLOOR)


@dataclass(frozen=True)
class RunnerResult:
    """How fast one runner graded the rollouts, and how many passed."""

    runner: str
    rollouts: int
    seconds: float
    passed: int
    expected: int
    skipped: str = ""
    cpu_ms: float = float("nan")

    @property
    def cpu_per_rollout(self) -> float:
        """CPU milliseconds per graded rollout (NaN when not measured)."""
        return ratio(self.cpu_ms, self.rollouts)

    @property
    def rate(self) -> float:
        """Graded rollouts per second (NaN when skipped)."""
        return ratio(self.rollouts, self.seconds) if not self.skipped else float("nan")


@dataclass
class EnvRun:
    """What the vector env graded, and where its time went."""

    threads: int = 0
    step_seconds: float = 0.0
    reset_seconds: float = 0.0
    step_cpu_ms: float = 0.0
    reset_cpu_ms: float = 0.0
    rollouts: list[Rollout] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)

    def results(self) -> tuple[RunnerResult, RunnerResult]:
        n, expected = len(self.rollouts), sum(r.should_pass for r in self.rollouts)
        passed = sum(reward == 1.0 for reward in self.rewards)
        step = RunnerResult(
            ENV_STEP, n, self.step_seconds, passed, expected, cpu_ms=self.step_cpu_ms
        )
        episode = RunnerResult(
            ENV_EPISODE,
            n,
            self.step_seconds + self.reset_seconds,
            passed,
            expected,
            cpu_ms=self.step_cpu_ms + self.reset_cpu_ms,
        )
        return step, episode

    def add(self, other: EnvRun) -> None:
        """Count ``other``'s episodes (of the same env) too."""
        self.threads = self.threads or other.threads
        self.step_seconds += other.step_seconds
        self.reset_seconds += other.reset_seconds
        self.step_cpu_ms += other.step_cpu_ms
        self.reset_cpu_ms += other.reset_cpu_ms
        self.rollouts += other.rollouts
        self.rewards += other.rewards


def combined(results: list[RunnerResult]) -> RunnerResult:
    """One runner's results on several batches of rollouts, as one.

    >>> a = RunnerResult(FLOOR, 32, 0.1, 16, 16, cpu_ms=100.0)
    >>> combined([a, a]).rate
    320.0
    """
    first = results[0]
    return RunnerResult(
        first.runner,
        sum(r.rollouts for r in results),
        sum(r.seconds for r in results),
        sum(r.passed for r in results),
        sum(r.expected for r in results),
        first.skipped,
        sum(r.cpu_ms for r in results),
    )


def open_vector_env(client: Any, task_set: str, groups: int, size: int) -> Any:
    """``gymnasium.make_vec("collimate/Code-v0", ...)`` with ``groups`` groups of ``size``."""
    import gymnasium as gym

    import collimate_envs  # noqa: F401  (registers the ids)

    return gym.make_vec(
        "collimate/Code-v0",
        num_envs=groups * size,
        group_size=size,
        task_set=task_set,
        client=client,
    )


def run_episodes(
    envs: Any,
    rounds: int,
    *,
    warmup: bool = True,
    meter: CpuMeter | None = None,
    first: int = 0,
) -> EnvRun:
    """Run ``rounds`` GRPO episodes (reset, then one step grading every member); time both.

    Each group's members answer with :func:`group_completions` for the task the reset drew
    (read from the reset ``info``; episode ``r`` resets with seed ``1000 + first + r``).
    A warm-up episode runs first, uncounted.
    """
    from collimate_envs import info as keys

    env = envs.unwrapped
    groups, size = env.num_groups, env.group_size
    tasks = {task.task_id: task for task in env.tasks.tasks}
    run = EnvRun(threads=int(env.concurrency))
    cpu = meter.read if meter is not None else (lambda: float("nan"))
    for r in range(-1 if warmup else 0, rounds):
        c0, t0 = cpu(), time.perf_counter()
        _, infos = envs.reset(seed=1000 + first + r)
        c1, t1 = cpu(), time.perf_counter()
        member_tasks = [tasks[str(infos[keys.TASK_ID][i])] for i in range(groups * size)]
        actions: list[str] = []
        for g in range(groups):
            actions += group_completions(member_tasks[g * size], size, f"{first + r}.{g}")
        _, rewards, *_ = envs.step(tuple(actions))
        c2, t2 = cpu(), time.perf_counter()
        if r < 0:
            continue  # the warm-up episode is not counted
        run.reset_seconds += t1 - t0
        run.step_seconds += t2 - t1
        run.reset_cpu_ms += c1 - c0
        run.step_cpu_ms += c2 - c1
        run.rewards += [float(x) for x in rewards]
        run.rollouts += [
            Rollout(task, completion, should_pass=(i % size) % 2 == 0)
            for i, (task, completion) in enumerate(zip(member_tasks, actions, strict=True))
        ]
    return run


def run_vector_env(
    client: Any,
    task_set: str,
    groups: int,
    size: int,
    rounds: int,
    meter: CpuMeter | None = None,
) -> EnvRun:
    """Open a ``groups`` x ``size`` vector env, run ``rounds`` timed episodes, close it."""
    envs = open_vector_env(client, task_set, groups, size)
    try:
        return run_episodes(envs, rounds, meter=meter)
    finally:
        envs.close()


def run_env_and_floor(
    client: Any,
    task_set: str,
    groups: int,
    size: int,
    rounds: int,
    workers: int,
    meter: CpuMeter | None = None,
) -> tuple[EnvRun, RunnerResult]:
    """The vector env's episodes, and the warm-fork floor on each episode's rollouts, in turns.

    This machine's speed drifts over seconds (a VM's neighbours): two runs a few seconds
    apart can differ by half. Taken in turns, episode by episode, the env and the floor
    see the same drift, so the ratio of their rates (the target) holds still.
    """
    envs = open_vector_env(client, task_set, groups, size)
    env_run, floors = EnvRun(), []
    try:
        with WarmForkClient() as floor_client:
            for r in range(rounds):
                episode = run_episodes(envs, 1, warmup=r == 0, meter=meter, first=r)
                env_run.add(episode)
                floor = run_program_runner(FLOOR, floor_client, episode.rollouts, workers, meter)
                floors.append(floor)
    finally:
        envs.close()
    return env_run, combined(floors)


def run_program_runner(
    name: str,
    client: Any,
    rollouts: list[Rollout],
    workers: int,
    meter: CpuMeter | None = None,
) -> RunnerResult:
    """Grade each rollout's plain test program through ``client.exec_once`` (exit 0 = pass)."""
    programs = [plain_program(r.task, r.completion) for r in rollouts]
    client.exec_once("python3", code=programs[0], timeout_seconds=30)  # warm-up

    def run(program: str) -> bool:
        return int(client.exec_once("python3", code=program, timeout_seconds=30)["exit_code"]) == 0

    return _timed(name, rollouts, lambda: batch_rate(run, programs, workers)[1], meter)


def run_grade_oneshot(
    client: Any, rollouts: list[Rollout], workers: int, meter: CpuMeter | None = None
) -> RunnerResult:
    """``grade()`` each rollout in a one-shot sandbox on the node (reward 1.0 = pass)."""
    from collimate_rl.grading import grade

    def run(rollout: Rollout) -> bool:
        spec = rollout.task.to_reward_spec()
        return grade(client, "python3", rollout.completion, spec).reward == 1.0

    run(rollouts[0])  # warm-up
    return _timed(GRADE_ONESHOT, rollouts, lambda: batch_rate(run, rollouts, workers)[1], meter)


def _timed(
    name: str,
    rollouts: list[Rollout],
    work: Callable[[], list[bool]],
    meter: CpuMeter | None,
) -> RunnerResult:
    c0, t0 = (meter.read() if meter else float("nan")), time.perf_counter()
    passed = work()
    seconds = time.perf_counter() - t0
    cpu = (meter.read() - c0) if meter else float("nan")
    return RunnerResult(name, len(rollouts), seconds, sum(passed), _expected(rollouts), cpu_ms=cpu)


def run_skyrl_lcb(rollouts: list[Rollout], workers: int) -> RunnerResult:
    """Grade the rollouts with skyrl-gym's ``lcb`` env in a worker process (skipped if absent)."""
    try:
        import skyrl_gym  # noqa: F401
    except ImportError:
        return RunnerResult(SKYRL, len(rollouts), 0.0, 0, _expected(rollouts), "skyrl-gym absent")
    cases = [lcb_case(r.task, r.completion) for r in rollouts]
    with tempfile.TemporaryDirectory(prefix="bench-lcb-") as tmp:
        request, result = os.path.join(tmp, "request.json"), os.path.join(tmp, "result.json")
        with open(request, "w") as fh:
            json.dump({"cases": [[c.completion, c.tests] for c in cases], "workers": workers}, fh)
        proc = subprocess.run(
            [sys.executable, "-m", "collimate_rl.bench._lcb_worker", request, result],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"the skyrl-gym lcb worker failed:\n{proc.stderr[-2000:]}")
        with open(result) as fh:
            out = json.load(fh)
    passed = sum(float(x) == 1.0 for x in out["rewards"])
    return RunnerResult(SKYRL, len(rollouts), float(out["seconds"]), passed, _expected(rollouts))


def _expected(rollouts: list[Rollout]) -> int:
    return sum(r.should_pass for r in rollouts)


def grpo_section(
    client: Any,
    task_set: str,
    *,
    groups: int,
    size: int,
    rounds: int,
    workers: int,
    progress: Callable[[str], None],
    meter: CpuMeter | None = None,
) -> Section:
    """Every runner on the rollouts of one task set, with rates, ratios and CPU per rollout."""
    progress(f"grpo {task_set}: vector env {groups}x{size} and the floor, {rounds} rounds in turns")
    env_run, floor = run_env_and_floor(client, task_set, groups, size, rounds, workers, meter)
    step, episode = env_run.results()
    rollouts = env_run.rollouts
    progress(f"grpo {task_set}: grade() one-shot")
    oneshot = run_grade_oneshot(client, rollouts, workers, meter)
    progress(f"grpo {task_set}: skyrl-gym lcb grader on {len(rollouts)} rollouts")
    skyrl = run_skyrl_lcb(rollouts, workers)
    progress(f"grpo {task_set}: bwrap + python -S")
    try:
        bwrap = run_program_runner(BWRAP, BwrapClient(), rollouts, workers, meter)
    except (ImportError, OSError) as exc:  # no bubblewrap here
        bwrap = RunnerResult(BWRAP, len(rollouts), 0.0, 0, _expected(rollouts), str(exc)[:60])
    progress(f"grpo {task_set}: subprocess python -S")
    sub = run_program_runner(SUBPROCESS, SubprocessClient(), rollouts, workers, meter)

    section = Section(
        key=f"grpo_{task_set.replace('-', '_')}",
        title=f"GRPO groups on {task_set}: G={groups} x K={size}, {len(rollouts)} rollouts",
        columns=[
            "runner",
            "rollouts/s",
            "vs floor",
            "env step vs runner",
            "CPU ms/rollout",
            "CPU vs floor",
            "passed / expected",
        ],
        notes=[
            f"Same {len(rollouts)} (task, completion) pairs for every runner; even members answer "
            "with the reference solution, odd members with a wrong one, each text its own (a "
            "sample comment). The vector env and the floor take turns, episode by episode.",
            f"The vector env grades with {env_run.threads} threads against the node (its "
            f"default: one batch request per step on this node); the other runners use "
            f"{workers} threads (the core count).",
            f"CPU: {meter.kind if meter else 'not measured'}; skyrl-gym's is not measured "
            "(its worker process also imports numpy and pandas).",
        ],
    )
    for result in (step, episode, oneshot, skyrl, bwrap, sub, floor):
        section.add(
            [
                result.runner,
                fmt(result.rate, 1) if not result.skipped else f"skipped: {result.skipped}",
                pct_text(ratio(result.rate, floor.rate)),
                times_text(ratio(step.rate, result.rate)),
                fmt(result.cpu_per_rollout, 1),
                times_text(ratio(result.cpu_per_rollout, floor.cpu_per_rollout)),
                f"{result.passed} / {result.expected}",
            ],
            {
                "runner": result.runner,
                "rollouts": result.rollouts,
                "seconds": result.seconds,
                "rollouts_per_s": result.rate,
                "vs_floor": ratio(result.rate, floor.rate),
                "cpu_ms_per_rollout": result.cpu_per_rollout,
                "cpu_vs_floor": ratio(result.cpu_per_rollout, floor.cpu_per_rollout),
                "passed": result.passed,
                "expected": result.expected,
                "skipped": result.skipped,
            },
        )
    return section
