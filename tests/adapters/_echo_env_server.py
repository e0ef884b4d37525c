"""A minimal OpenEnv env server: echoes the action's text; reward = its length."""

from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class EchoAction(Action):
    text: str


class EchoObservation(Observation):
    echoed: str = ""


class EchoEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id, step_count=0)
        return EchoObservation(echoed="ready")

    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        return EchoObservation(echoed=action.text, reward=float(len(action.text)), done=False)

    @property
    def state(self):
        return self._state


app = create_fastapi_app(EchoEnv, EchoAction, EchoObservation, max_concurrent_envs=4)
