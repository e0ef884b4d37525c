"""The benchmark suite behind ``collimate bench``: the local node and the envs, side by side
with unisolated runners and skyrl-gym's grader, in one run.

Modules: :mod:`~collimate_rl.bench.latency` (no-op exec latency),
:mod:`~collimate_rl.bench.grpo` (GRPO group throughput), :mod:`~collimate_rl.bench.forks`
(fork-group latency, memory per idle session), :mod:`~collimate_rl.bench.scaling` (group size,
threads, live sessions), :mod:`~collimate_rl.bench.baselines` (the unisolated runners),
:mod:`~collimate_rl.bench.workload` (the rollouts), :mod:`~collimate_rl.bench.report` and
:mod:`~collimate_rl.bench.targets` (tables), :mod:`~collimate_rl.bench.stats`.

>>> from collimate_rl.bench import main
>>> callable(main)
True
"""

from __future__ import annotations

from collimate_rl.bench.suite import main

__all__ = ["main"]
