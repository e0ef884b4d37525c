"""Exec seeds for env episodes, derived from the env's own RNG so ``reset(seed=...)`` replays."""

from __future__ import annotations

from typing import Literal

import numpy as np

from collimate_rl.seeds import DET_SEED, is_valid_seed, seed_from_key

__all__ = ["SeedMode", "episode_seed", "validate_seed_mode"]

SeedMode = Literal["vanilla", "crn", "deterministic"]
_MODES = ("vanilla", "crn", "deterministic")


def validate_seed_mode(mode: str, base_seed: str | None) -> SeedMode:
    """Check a seed mode and base seed early, with a clear error."""
    if mode not in _MODES:
        raise ValueError(f"seed_mode must be one of {_MODES}, got {mode!r}")
    if base_seed is not None and not is_valid_seed(base_seed):
        raise ValueError("base_seed must be 64 hex characters")
    return mode  # type: ignore[return-value]


def episode_seed(mode: SeedMode, rng: np.random.Generator, key: str, base_seed: str | None) -> str:
    """The exec seed for one rollout.

    ``vanilla`` draws from the env's RNG (fresh per rollout, yet replayable under
    ``reset(seed=...)``); ``crn`` derives one seed per ``key`` (for example the
    task), shared by every rollout of it; ``deterministic`` is fixed.

    >>> rng = np.random.default_rng(0)
    >>> episode_seed("crn", rng, "task-1", None) == episode_seed("crn", rng, "task-1", None)
    True
    >>> episode_seed("deterministic", rng, "x", None) == DET_SEED
    True
    """
    if mode == "deterministic":
        return base_seed or DET_SEED
    if mode == "crn":
        return seed_from_key(key, salt=base_seed or "")
    return rng.bytes(32).hex()
