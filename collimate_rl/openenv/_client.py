"""An openenv-core ``EnvClient`` for the collimate env server."""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from collimate_rl.openenv._models import CollimateAction, CollimateObservation, CollimateState

__all__ = ["CollimateEnvClient"]


class CollimateEnvClient(EnvClient[CollimateAction, CollimateObservation, CollimateState]):  # type: ignore[misc]
    """OpenEnv's async WebSocket client, typed for :class:`CollimateEnvironment`.

    Use ``async with CollimateEnvClient(base_url=url) as env`` (or ``.sync()``);
    ``await env.reset(task_id=...)``, then ``await env.step(CollimateAction(text=...))``.
    """

    def _step_payload(self, action: CollimateAction) -> dict[str, Any]:
        return {"text": action.text, "metadata": action.metadata}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[CollimateObservation]:
        observation = CollimateObservation(
            **payload.get("observation", {}),
            reward=payload.get("reward"),
            done=bool(payload.get("done", False)),
        )
        return StepResult(
            observation=observation,
            reward=payload.get("reward"),
            done=bool(payload.get("done", False)),
        )

    def _parse_state(self, payload: dict[str, Any]) -> CollimateState:
        return CollimateState(**payload)
