"""The argument checks every env of the suite makes alike, with the same messages.

>>> group_shape(8, 4)
(8, 4)
>>> group_shape(6, None)
(6, 6)
>>> check_infra_mode("zero")
Traceback (most recent call last):
    ...
ValueError: on_infra_error must be 'raise' or 'flag'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["check_infra_mode", "check_render_mode", "group_shape"]


def check_render_mode(render_mode: str | None, metadata: Mapping[str, Any]) -> None:
    """``render_mode`` is ``None`` or one of the env's ``metadata["render_modes"]``."""
    modes = metadata["render_modes"]
    if render_mode is not None and render_mode not in modes:
        allowed = " or ".join(repr(m) for m in modes)
        raise ValueError(f"render_mode must be None or {allowed}, got {render_mode!r}")


def check_infra_mode(on_infra_error: str) -> None:
    """An env either raises an infrastructure failure or flags it in ``info``, never a reward."""
    if on_infra_error not in ("raise", "flag"):
        raise ValueError("on_infra_error must be 'raise' or 'flag'")


def group_shape(num_envs: int, group_size: int | None) -> tuple[int, int]:
    """``(num_envs, group_size)`` of a vector env of GRPO groups (one group by default)."""
    size = num_envs if group_size is None else group_size
    if num_envs < 1 or size < 1 or num_envs % size:
        raise ValueError(
            f"num_envs ({num_envs}) must be a positive multiple of group_size ({size})"
        )
    return num_envs, size
