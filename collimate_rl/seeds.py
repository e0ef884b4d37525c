"""Exec seeds: 32 bytes written as 64 hex characters.

A seed pins the guest's randomness, so an exec can be replayed. Groups of
rollouts choose how they share seeds with :func:`group_seeds`:

``vanilla``
    every member draws fresh entropy (no seed is sent; the node picks one and
    echoes it back).
``crn``
    common random numbers: every member gets the same seed, ``base_seed`` or
    one fresh seed for the group.
``deterministic``
    every member gets ``base_seed`` or the fixed :data:`DET_SEED`.

Everything here is pure apart from :func:`fresh_seed`, which reads the OS
entropy pool.

>>> len(fresh_seed()), is_valid_seed(DET_SEED)
(64, True)
>>> group_seeds(2, "deterministic") == [DET_SEED, DET_SEED]
True
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Final

from collimate_rl.errors import CollimateUsageError

__all__ = ["DET_SEED", "MODES", "fresh_seed", "group_seeds", "is_valid_seed", "seed_from_key"]

#: The fixed seed of ``deterministic`` mode when no base seed is given.
DET_SEED: Final[str] = "deadbeef" * 8

#: The seed modes :func:`group_seeds` understands.
MODES: Final[tuple[str, str, str]] = ("vanilla", "crn", "deterministic")

_SEED_RE: Final = re.compile(r"[0-9a-fA-F]{64}")


def fresh_seed() -> str:
    """Return a new random seed (64 lowercase hex characters).

    >>> seed = fresh_seed()
    >>> is_valid_seed(seed), seed == seed.lower()
    (True, True)
    """
    return os.urandom(32).hex()


def is_valid_seed(value: object) -> bool:
    """Tell whether ``value`` is a string of exactly 64 hex characters (either case).

    >>> is_valid_seed("AB" * 32), is_valid_seed("ab" * 31), is_valid_seed(42)
    (True, False, False)
    >>> is_valid_seed("ab" * 32 + "\\n")
    False
    """
    return isinstance(value, str) and _SEED_RE.fullmatch(value) is not None


def seed_from_key(key: str, salt: str = "") -> str:
    """Derive a stable seed from a key: ``sha256(salt + "\\x00" + key)``.

    Use it to give every rollout of one prompt the same seed across runs.

    Args:
        key: what identifies the group, e.g. ``"gsm8k:17"``.
        salt: an optional namespace, e.g. the run name.

    >>> seed_from_key("prompt-1") == seed_from_key("prompt-1")
    True
    >>> seed_from_key("prompt-1") == seed_from_key("prompt-1", salt="run-2")
    False
    >>> seed_from_key("")[:16]
    '6e340b9cffb37a98'
    """
    return hashlib.sha256((salt + "\x00" + key).encode("utf-8")).hexdigest()


def group_seeds(n: int, mode: str = "crn", base_seed: str | None = None) -> list[str | None]:
    """The seeds for a group of ``n`` rollouts under ``mode``.

    Args:
        n: the group size (``>= 0``).
        mode: one of :data:`MODES`.
        base_seed: the seed to share (``crn``, ``deterministic``); ignored by
            ``vanilla``.

    Returns:
        ``n`` seeds; ``None`` means "let the node draw one".

    Raises:
        ValueError: ``n < 0``, an unknown mode, or a malformed ``base_seed``.

    >>> group_seeds(3, "vanilla")
    [None, None, None]
    >>> a, b = group_seeds(2, "crn")
    >>> a == b and is_valid_seed(a)
    True
    >>> group_seeds(1, "crn", base_seed="0" * 64)
    ['0000000000000000000000000000000000000000000000000000000000000000']
    >>> group_seeds(1, "zany")
    Traceback (most recent call last):
    ...
    collimate_rl.errors.CollimateUsageError: unknown seed mode 'zany'; expected one of vanilla, crn, deterministic
    """
    if n < 0:
        raise CollimateUsageError(f"group size must be >= 0, got {n}")
    if mode not in MODES:
        raise CollimateUsageError(f"unknown seed mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == "vanilla":
        return [None] * n
    seed = base_seed or (DET_SEED if mode == "deterministic" else fresh_seed())
    if not is_valid_seed(seed):
        raise CollimateUsageError("base_seed must be 64 hex chars")
    return [seed] * n
