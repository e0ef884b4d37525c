"""Rewards and grading: reward specs, an unforgeable in-sandbox oracle, batches, replay.

A grade is one exec. The harness decides the verdict in a process the
candidate never ran in, from plain data only, and stamps it with a nonce the
candidate never saw; see :mod:`collimate_rl.grading._harness`.

>>> from collimate_rl.grading import UnitTestReward, extract_code
>>> spec = UnitTestReward("assert add(1, 2) == 3", entry="add")
>>> extract_code("```python\\ndef add(a, b):\\n    return a + b\\n```")
'def add(a, b):\\n    return a + b'
"""

from collimate_rl.grading.extract import extract_code
from collimate_rl.grading.grade import (
    InfraErrorMode,
    ProgressCallback,
    ResultCallback,
    agrade,
    agrade_batch,
    grade,
    grade_batch,
)
from collimate_rl.grading.ground_truth import FORMATS, reward_spec_from_ground_truth
from collimate_rl.grading.languages import LANGUAGES, Language, language
from collimate_rl.grading.multipl_e import MultiPLEReward
from collimate_rl.grading.replay import ReplayRecorder, ReplayReport, ReplayRow, replay
from collimate_rl.grading.result import TEST_STATUSES, GradeResult, TestOutcome
from collimate_rl.grading.specs import (
    CustomReward,
    FunctionCallReward,
    IOReward,
    PropertyReward,
    RewardSpec,
    UnitTestReward,
    spec_from_dict,
)

__all__ = [
    "FORMATS",
    "LANGUAGES",
    "TEST_STATUSES",
    "CustomReward",
    "FunctionCallReward",
    "GradeResult",
    "IOReward",
    "InfraErrorMode",
    "Language",
    "MultiPLEReward",
    "ProgressCallback",
    "PropertyReward",
    "ReplayRecorder",
    "ReplayReport",
    "ReplayRow",
    "ResultCallback",
    "RewardSpec",
    "TestOutcome",
    "UnitTestReward",
    "agrade",
    "agrade_batch",
    "extract_code",
    "grade",
    "grade_batch",
    "language",
    "replay",
    "reward_spec_from_ground_truth",
    "spec_from_dict",
]
