"""``collimate/Repo-v0``: SWE-style repository tasks, graded by hidden tests a patch cannot touch.

>>> from collimate_envs.repo import RepoTask, parse_action
>>> parse_action('{"name": "submit", "arguments": {}}').name
'submit'
"""

from collimate_envs.repo._actions import TOOLS, ActionError, ToolCall, parse_action
from collimate_envs.repo._grader import RepoGrade, grade_changes
from collimate_envs.repo._patch import PatchError, apply_patch, make_patch, parse_patch
from collimate_envs.repo._policy import refusal
from collimate_envs.repo._task import ROW_FORMATS, RepoTask, RowError
from collimate_envs.repo._tasks import load_repo_tasks
from collimate_envs.repo._templates import ImageTemplatesUnavailable, template_for
from collimate_envs.repo._testids import canonical, outcomes_from_log

__all__ = [
    "ROW_FORMATS",
    "TOOLS",
    "ActionError",
    "ImageTemplatesUnavailable",
    "PatchError",
    "RepoGrade",
    "RepoTask",
    "RowError",
    "ToolCall",
    "apply_patch",
    "canonical",
    "grade_changes",
    "load_repo_tasks",
    "make_patch",
    "outcomes_from_log",
    "parse_action",
    "parse_patch",
    "refusal",
    "template_for",
]
