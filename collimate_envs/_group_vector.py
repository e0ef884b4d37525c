"""What the suite's GRPO group vector envs share: G groups of K members over text spaces.

``collimate/Code-v0``'s vector env and ``collimate/Repo-v0``'s differ in what a member
does in an episode (one graded completion; many tool calls) and in how its sandboxes are
made. What stays is here: the checked shape (members of group ``g`` are indices
``g*K .. g*K+K-1``), the text spaces, the backend, the seeding, the per-group infos, the
group-relative advantages and the pool of threads that drives the members.

>>> envs = GroupVectorBase(6, 3, on_infra_error="flag")
>>> envs.num_groups, list(envs._members(1))
(2, [3, 4, 5])
>>> envs._add_group_info({}, 0, {"group": 0})["_group"]
array([ True,  True,  True, False, False, False])
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from collimate_envs._backend import Backend
from collimate_envs._checks import check_infra_mode, group_shape
from collimate_envs.spaces import completion_space, prompt_space

__all__ = ["GroupVectorBase", "StepResult", "group_advantages"]

#: What a vector env's ``step`` returns: observations, rewards, terminated, truncated, infos.
StepResult = tuple[
    tuple[str, ...],
    npt.NDArray[np.float64],
    npt.NDArray[np.bool_],
    npt.NDArray[np.bool_],
    dict[str, Any],
]


def group_advantages(
    rewards: npt.NDArray[np.float64], valid: npt.NDArray[np.bool_], eps: float = 1e-6
) -> npt.NDArray[np.float64]:
    """GRPO's group-relative advantage over the valid members; NaN for invalid ones.

    >>> group_advantages(np.array([1.0, 0.0, 1.0, 0.0]), np.array([True] * 4)).round(3)
    array([ 1., -1.,  1., -1.])
    >>> group_advantages(np.array([1.0, 0.5]), np.array([True, False]))
    array([ 0., nan])
    """
    out = np.full(rewards.shape, np.nan)
    if valid.any():
        chosen = rewards[valid]
        out[valid] = (chosen - chosen.mean()) / (chosen.std() + eps)
    return out


class GroupVectorBase(VectorEnv[Any, Any, Any]):
    """``num_envs = num_groups * group_size`` members with text observations and actions.

    A subclass adds its episodes: its ``reset`` seeds with :meth:`_seed_rng`, its ``step``
    takes the actions through :meth:`_checked_actions`, both batch a group's info with
    :meth:`_add_group_info`, it drives members on the threads of :meth:`_workers` and its
    ``close_extras`` stops them with :meth:`_close_workers`.
    """

    metadata: dict[str, Any] = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}
    #: The name of the threads of :meth:`_workers` (they show in a thread dump).
    worker_name: ClassVar[str] = "collimate-group"
    #: How many threads :meth:`_workers` has: each env sets it, by its own default.
    concurrency: int = 1

    def __init__(
        self,
        num_envs: int,
        group_size: int | None,
        *,
        on_infra_error: str,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        unix_socket: str | None = None,
        render_mode: str | None = None,
    ) -> None:
        num_envs, group_size = group_shape(num_envs, group_size)
        check_infra_mode(on_infra_error)
        self.num_envs = num_envs
        self.group_size = group_size
        self.num_groups = num_envs // group_size
        self.on_infra_error = on_infra_error
        self.render_mode = render_mode
        self.backend = Backend.from_kwargs(
            client, {"base_url": base_url, "api_key": api_key, "unix_socket": unix_socket}
        )
        self.single_observation_space = prompt_space()
        self.single_action_space = completion_space()
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._pool: ThreadPoolExecutor | None = None

    def _members(self, g: int) -> range:
        """The indices of group ``g``'s members."""
        return range(g * self.group_size, (g + 1) * self.group_size)

    def _seed_rng(self, seed: int | list[int] | None) -> None:
        """Seed the env's RNG, as ``VectorEnv.reset`` does.

        Every group draws from the one RNG, so a list of seeds (one per env, as gymnasium
        passes them) seeds it from its first.
        """
        if isinstance(seed, list):
            seed = seed[0] if seed else None
        super().reset(seed=seed)

    def _checked_actions(self, actions: Any) -> tuple[Any, ...]:
        """``actions`` as a tuple, one per member (a ``ValueError`` otherwise)."""
        checked = tuple(actions)
        if len(checked) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(checked)}")
        return checked

    def _add_group_info(
        self, infos: dict[str, Any], g: int, info: dict[str, Any]
    ) -> dict[str, Any]:
        """``infos`` with ``info`` added for every member of group ``g``."""
        for i in self._members(g):
            infos = self._add_info(infos, info, i)
        return infos

    def _workers(self) -> ThreadPoolExecutor:
        """The pool of ``concurrency`` threads that drives members (made on first use)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix=self.worker_name)
        return self._pool

    def _close_workers(self) -> None:
        """Shut the pool down (a later :meth:`_workers` makes a new one)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()
