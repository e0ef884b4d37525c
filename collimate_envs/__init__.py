"""Gymnasium environments whose steps run code in Collimate sandboxes.

Importing this package registers every env under the ``collimate`` namespace;
``gymnasium.make("collimate_envs:collimate/Code-v0")`` works without a prior
import.

>>> import gymnasium as gym
>>> import collimate_envs
>>> sorted(env_id for env_id in gym.registry if env_id.startswith("collimate/"))
['collimate/Code-v0', 'collimate/CodeFeedback-v0', 'collimate/Repo-v0', 'collimate/Shell-v0']
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from collimate_envs import info
from collimate_envs.spaces import completion_space, prompt_space

__all__ = [
    "ENV_IDS",
    "CodeEnv",
    "CodeFeedbackEnv",
    "GroupVectorEnv",
    "RepoEnv",
    "RepoGroupVectorEnv",
    "ShellEnv",
    "completion_space",
    "info",
    "prompt_space",
]

ENV_IDS = (
    "collimate/Code-v0",
    "collimate/CodeFeedback-v0",
    "collimate/Shell-v0",
    "collimate/Repo-v0",
)

_ENTRY_POINTS = {
    "collimate/Code-v0": "collimate_envs.code:CodeEnv",
    "collimate/CodeFeedback-v0": "collimate_envs.feedback:CodeFeedbackEnv",
    "collimate/Shell-v0": "collimate_envs.shell:ShellEnv",
    "collimate/Repo-v0": "collimate_envs.repo.env:RepoEnv",
}
_VECTOR_ENTRY_POINTS = {
    "collimate/Code-v0": "collimate_envs.vector:GroupVectorEnv",
    "collimate/Repo-v0": "collimate_envs.repo.vector:RepoGroupVectorEnv",
}

for _env_id, _entry_point in _ENTRY_POINTS.items():
    if _env_id not in registry:
        register(
            id=_env_id,
            entry_point=_entry_point,
            vector_entry_point=_VECTOR_ENTRY_POINTS.get(_env_id),
        )


def __getattr__(name: str) -> object:
    # Lazy: importing the package only registers ids; env classes load on use.
    lazy = {
        "CodeEnv": "collimate_envs.code",
        "CodeFeedbackEnv": "collimate_envs.feedback",
        "ShellEnv": "collimate_envs.shell",
        "GroupVectorEnv": "collimate_envs.vector",
        "RepoEnv": "collimate_envs.repo.env",
        "RepoGroupVectorEnv": "collimate_envs.repo.vector",
    }
    if name in lazy:
        import importlib

        return getattr(importlib.import_module(lazy[name]), name)
    raise AttributeError(f"module 'collimate_envs' has no attribute {name!r}")
