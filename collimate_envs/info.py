"""Names of the keys the envs put in ``info`` (use these instead of string literals).

>>> TASK_ID, PASSED, TOTAL
('task_id', 'passed', 'total')

The task behind a step, or behind member ``i`` of a vector env (``infos[TASK_ID][i]``), is the
task with that id in the task set the env draws from (``collimate-basic`` by default):

>>> from collimate_envs.tasks import load_task_set
>>> tasks = load_task_set("collimate-basic")
>>> info = {TASK_ID: "basic/count-vowels"}  # as env.reset() or env.step() return it
>>> tasks[info[TASK_ID]].entry_point
'count_vowels'
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ADVANTAGE",
    "EXIT_CODE",
    "GROUP",
    "INFRA_ERROR",
    "PASSED",
    "REWARD",
    "SEED",
    "SEED_ACK",
    "TASK_ID",
    "TOTAL",
    "TURN",
]

TASK_ID: Final = "task_id"
PASSED: Final = "passed"
TOTAL: Final = "total"
EXIT_CODE: Final = "exit_code"
SEED: Final = "seed"
SEED_ACK: Final = "seed_ack"
#: True when the grade failed for infrastructure reasons; the reward is then not a grade.
INFRA_ERROR: Final = "infra_error"
#: The group-relative advantage (reward - group mean) / (group std + eps), GRPO style.
ADVANTAGE: Final = "advantage"
#: The index of the GRPO group a vector-env member belongs to.
GROUP: Final = "group"
REWARD: Final = "reward"
TURN: Final = "turn"
