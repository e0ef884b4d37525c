"""SkyRL adapter: the ``collimate_envs`` envs as ``skyrl_gym`` text envs.

Call :func:`register` in each process that builds envs (SkyRL's docs put it in
the Ray entrypoint, before ``BasePPOExp(cfg).run()``), then name an id as the
row's ``env_class`` (or ``environment.env_class``):

=========================  =========================================================
``collimate_code``         :class:`CollimateCodeEnv`: ``collimate/Code-v0``, or
                           ``collimate/CodeFeedback-v0`` when ``max_turns > 1``
``collimate_code_feedback`` ``collimate/CodeFeedback-v0`` (multi-turn, test feedback)
``collimate_shell``        ``collimate/Shell-v0`` (a persistent sandbox session)
``collimate_repo``         :class:`CollimateRepoEnv`: ``collimate/Repo-v0`` (tool calls on a
                           repository; the row is a SWE-bench/R2E-Gym/SWE-smith task)
``collimate``              :class:`CollimateEnv`; ``env_config.env_id`` picks the env
=========================  =========================================================

Rows carry ``reward_spec.ground_truth`` in any format
:func:`~collimate_rl.grading.reward_spec_from_ground_truth` reads (SkyRL
``lcb`` rows included). ``skyrl_gym`` is needed: install the ``skyrl`` extra.

>>> import skyrl_gym
>>> from collimate_rl import skyrl
>>> skyrl.register()
['collimate', 'collimate_code', 'collimate_code_feedback', 'collimate_repo', 'collimate_shell']
>>> env = skyrl_gym.make("collimate_code", env_config={},
...                      extras={"reward_spec": {"ground_truth": ["assert inc(1) == 2"]}})
>>> type(env).__name__, env.spec.id
('CollimateCodeEnv', 'collimate_code')
"""

from __future__ import annotations

from typing import Any

from collimate_rl._adapters import AdapterConfig

__all__ = [
    "ENV_IDS",
    "AdapterConfig",
    "CollimateCodeEnv",
    "CollimateEnv",
    "CollimateRepoEnv",
    "register",
]

_ENTRY = "collimate_rl.skyrl._env:"

#: The ids :func:`register` adds, and what each makes.
ENV_IDS: dict[str, tuple[str, dict[str, Any]]] = {
    "collimate": (_ENTRY + "CollimateEnv", {}),
    "collimate_code": (_ENTRY + "CollimateCodeEnv", {}),
    "collimate_code_feedback": (_ENTRY + "CollimateEnv", {"env_id": "collimate/CodeFeedback-v0"}),
    "collimate_shell": (_ENTRY + "CollimateEnv", {"env_id": "collimate/Shell-v0"}),
    "collimate_repo": (_ENTRY + "CollimateRepoEnv", {}),
}


def register(ids: list[str] | None = None) -> list[str]:
    """Register the SkyRL env ids (all of :data:`ENV_IDS` by default); safe to call again.

    skyrl-gym raises on a duplicate id, so ids already registered to the same
    entry point are skipped; an id taken by something else raises.

    Returns:
        The ids now registered by this adapter, sorted.

    Raises:
        ImportError: skyrl-gym is missing (install the ``skyrl`` extra).
        skyrl_gym.error.RegistrationError: an id belongs to another env.
    """
    try:
        from skyrl_gym.envs import registration
    except ImportError as exc:
        raise ImportError(
            "collimate_rl.skyrl needs skyrl-gym: pip install 'collimate-rl[skyrl]'"
        ) from exc
    wanted = sorted(ids or ENV_IDS)
    for env_id in wanted:
        entry_point, kwargs = ENV_IDS[env_id]
        existing = registration.registry.get(env_id)
        if existing is not None and existing.entry_point == entry_point:
            continue
        registration.register(id=env_id, entry_point=entry_point, kwargs=dict(kwargs))
    return wanted


def __getattr__(name: str) -> Any:
    # The env classes subclass skyrl_gym's BaseTextEnv: load them (and skyrl_gym) on use.
    if name in ("CollimateEnv", "CollimateCodeEnv", "CollimateRepoEnv"):
        try:
            from collimate_rl.skyrl import _env
        except ImportError as exc:
            raise ImportError(
                "collimate_rl.skyrl needs skyrl-gym: pip install 'collimate-rl[skyrl]'"
            ) from exc

        return getattr(_env, name)
    raise AttributeError(f"module 'collimate_rl.skyrl' has no attribute {name!r}")
