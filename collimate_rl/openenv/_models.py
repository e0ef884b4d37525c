"""The OpenEnv wire models of a collimate env: text in, text and info out."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

__all__ = ["CollimateAction", "CollimateObservation", "CollimateState"]


class CollimateAction(Action):  # type: ignore[misc]
    """One action: the model's completion (a code answer, a shell command, ``submit``).

    ``collimate/Repo-v0`` takes a tool call too: ``tool_call={"name", "arguments"}`` (or the
    same as JSON in ``text``, or text with one fenced bash block).
    """

    text: str = Field(default="", description="the completion or command")
    tool_call: dict[str, Any] | None = Field(
        default=None, description="Repo-v0: an OpenAI-style function call, over text"
    )


class CollimateObservation(Observation):  # type: ignore[misc]
    """What the env shows next, plus the step's info.

    OpenEnv never sends ``Observation.metadata`` to clients, so the env's
    ``info`` (``task_id``, ``passed``, ``total``, ``seed``, ...; see
    :mod:`collimate_envs.info`) travels in ``info``.
    """

    text: str = Field(default="", description="the prompt, feedback or command output")
    info: dict[str, Any] = Field(default_factory=dict, description="the env's step info")


class CollimateState(State):  # type: ignore[misc]
    """The episode's state: OpenEnv's ``episode_id`` / ``step_count`` plus the env and task."""

    env_id: str = ""
    task_id: str | None = None
    done: bool = False
