"""collimate-rl: sandboxed code execution as reinforcement-learning environments.

>>> import collimate_rl
>>> collimate_rl.is_valid_seed(collimate_rl.DET_SEED)
True
"""

from collimate_rl._version import __version__
from collimate_rl.errors import (
    CollimateDrainingError,
    CollimateError,
    CollimateTaskError,
    DemoTierLimit,
    GatewayError,
)
from collimate_rl.seeds import DET_SEED, fresh_seed, group_seeds, is_valid_seed, seed_from_key
from collimate_rl.wire import (
    AsyncCollimateClient,
    AsyncGatewayClient,
    CollimateClient,
    GatewayClient,
    SessionClient,
    connect,
    connect_async,
)

__all__ = [
    "DET_SEED",
    "AsyncCollimateClient",
    "AsyncGatewayClient",
    "CollimateClient",
    "CollimateDrainingError",
    "CollimateError",
    "CollimateTaskError",
    "DemoTierLimit",
    "GatewayClient",
    "GatewayError",
    "SessionClient",
    "__version__",
    "connect",
    "connect_async",
    "fresh_seed",
    "group_seeds",
    "is_valid_seed",
    "seed_from_key",
]
