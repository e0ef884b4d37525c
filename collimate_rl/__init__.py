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
from collimate_rl.grading import (
    CustomReward,
    FunctionCallReward,
    GradeResult,
    IOReward,
    PropertyReward,
    ReplayRecorder,
    RewardSpec,
    UnitTestReward,
    extract_code,
    grade,
    grade_batch,
    replay,
    reward_spec_from_ground_truth,
)
from collimate_rl.sandbox import ExecResult, ForkGroup, Sandbox
from collimate_rl.seeds import DET_SEED, fresh_seed, group_seeds, is_valid_seed, seed_from_key
from collimate_rl.templates import (
    Env,
    Ready,
    Template,
    TemplateBakeFailed,
    TemplateHandle,
    TemplateStatus,
    environment,
)
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
    "CustomReward",
    "DemoTierLimit",
    "Env",
    "ExecResult",
    "ForkGroup",
    "FunctionCallReward",
    "GatewayClient",
    "GatewayError",
    "GradeResult",
    "IOReward",
    "PropertyReward",
    "Ready",
    "ReplayRecorder",
    "RewardSpec",
    "Sandbox",
    "SessionClient",
    "Template",
    "TemplateBakeFailed",
    "TemplateHandle",
    "TemplateStatus",
    "UnitTestReward",
    "__version__",
    "connect",
    "connect_async",
    "environment",
    "extract_code",
    "fresh_seed",
    "grade",
    "grade_batch",
    "group_seeds",
    "is_valid_seed",
    "replay",
    "reward_spec_from_ground_truth",
    "seed_from_key",
]
