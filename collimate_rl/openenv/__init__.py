"""OpenEnv adapter: serve any collimate env through openenv-core's own server.

.. code-block:: bash

    COLLIMATE_ENV_ID=collimate/Shell-v0 python -m collimate_rl.openenv --port 8000

.. code-block:: python

    from collimate_rl.openenv import CollimateAction, CollimateEnvClient
    async with CollimateEnvClient(base_url="http://127.0.0.1:8000") as env:
        first = await env.reset(task_id="basic/count-vowels")
        result = await env.step(CollimateAction(text="```python\\n...\\n```"))

Every WebSocket session gets its own env, so its own sandbox; closing the
socket closes the env. Needs openenv-core: install the ``openenv`` extra.

The other direction, an OpenEnv env server running *inside* a sandbox:
``await GenericEnvClient.from_docker_image(template, provider=CollimateProvider(client))``
(see :mod:`collimate_rl.openenv._provider` and docs/services.md).

>>> from collimate_rl.openenv import CollimateEnvironment
>>> CollimateEnvironment.SUPPORTS_CONCURRENT_SESSIONS
True
"""

try:
    import openenv.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "collimate_rl.openenv needs openenv-core: pip install 'collimate-rl[openenv]'"
    ) from exc

from collimate_rl.openenv._client import CollimateEnvClient
from collimate_rl.openenv._environment import CollimateEnvironment
from collimate_rl.openenv._models import CollimateAction, CollimateObservation, CollimateState
from collimate_rl.openenv._provider import CollimateProvider, image_to_template
from collimate_rl.openenv._server import create_app, serve

__all__ = [
    "CollimateAction",
    "CollimateEnvClient",
    "CollimateEnvironment",
    "CollimateObservation",
    "CollimateProvider",
    "CollimateState",
    "create_app",
    "image_to_template",
    "serve",
]
