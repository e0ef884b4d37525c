"""Names of the keys the envs put in ``info`` (use these instead of string literals).

>>> TASK_ID, PASSED, TOTAL
('task_id', 'passed', 'total')
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
