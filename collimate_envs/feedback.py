"""``collimate/CodeFeedback-v0``: retry a task with the test feedback, up to ``max_turns``."""

from __future__ import annotations

from typing import Any, SupportsFloat

from collimate_envs import info as keys
from collimate_envs.code import CodeEnv
from collimate_envs.spaces import printable

__all__ = ["REWARD_MODES", "CodeFeedbackEnv", "format_feedback"]

#: How the per-turn rewards are shaped (see :class:`CodeFeedbackEnv`).
REWARD_MODES = ("final", "improvement", "each")


def format_feedback(result: Any, turn: int, max_turns: int, *, max_chars: int = 4000) -> str:
    """The observation after a failing attempt: the score, failing tests, output tail.

    >>> class R: passed, total, tests, output_tail, exit_code = 1, 3, (), "boom", 1
    >>> print(format_feedback(R(), 1, 3))
    Attempt 1 of 3 passed 1/3 tests (exit code 1). Fix the code and answer again.
    Output (tail):
    boom
    """
    lines = [
        f"Attempt {turn} of {max_turns} passed {result.passed}/{result.total} tests "
        f"(exit code {result.exit_code}). Fix the code and answer again."
    ]
    tests = result.tests or ()
    failing = [t for t in tests if getattr(t, "status", "pass") != "pass" and _ran(t)]
    for test in failing[:10]:
        name = getattr(test, "name", "") or f"test {getattr(test, 'index', '?')}"
        detail = getattr(test, "detail", "")
        lines.append(
            f"- {name}: {getattr(test, 'status', 'fail')}" + (f": {detail}" if detail else "")
        )
    if len(failing) > 10:
        lines.append(f"- ... and {len(failing) - 10} more failing tests")
    skipped = sum(not _ran(t) for t in tests)
    if skipped:
        lines.append(f"- {skipped} more not run after the first failure")
    tail = (result.output_tail or "").strip()
    if tail:
        lines += ["Output (tail):", tail[-1500:]]
    return printable("\n".join(lines)[:max_chars])


def _ran(test: Any) -> bool:
    return bool(getattr(test, "ran", True))


class CodeFeedbackEnv(CodeEnv):
    """Multi-turn code generation: a failing attempt's test feedback becomes the next observation.

    ## Description
    Like ``collimate/Code-v0``, but an attempt that does not pass every test
    returns the feedback (score, failing tests, output tail) as the next
    observation, until all tests pass or ``max_turns`` attempts were made.
    Each attempt runs in a fresh fork of the template's warm sandbox.

    ## Rewards
    ``reward_mode`` shapes the per-turn rewards from each attempt's score ``s_t``:

    * ``"final"`` (default): 0 on every turn but the last, which gets ``s_T``.
    * ``"improvement"``: ``max(0, s_t - best_before)``; the episode's rewards sum
      to the best score reached.
    * ``"each"``: ``s_t`` on every turn.

    ``turn_penalty`` is subtracted from the reward of every turn after the first.

    ## Episode End
    Terminates when an attempt passes every test; truncates after ``max_turns``.

    ## Arguments
    Those of ``CodeEnv`` plus ``max_turns`` (default 3), ``reward_mode``,
    ``turn_penalty`` (default 0.0).

    ## Version History
    * v0: initial version.
    """

    def __init__(
        self,
        task_set: Any = "collimate-basic",
        *,
        max_turns: int = 3,
        reward_mode: str = "final",
        turn_penalty: float = 0.0,
        **kwargs: Any,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {reward_mode!r}")
        super().__init__(task_set, **kwargs)
        self.max_turns = max_turns
        self.reward_mode = reward_mode
        self.turn_penalty = turn_penalty
        self._turn = 0
        self._best = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        self._turn = 0
        self._best = 0.0
        info[keys.TURN] = 0
        return obs, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        task = self._task
        _, score, _, _, info = super().step(action)  # grades; clears the task
        self._turn += 1
        score = float(score)
        result = self._last["result"]
        terminated = result.total > 0 and result.passed == result.total and not result.infra_error
        truncated = not terminated and self._turn >= self.max_turns
        reward = self._shape(score, last=terminated or truncated)
        self._best = max(self._best, score)
        info[keys.TURN] = self._turn
        if terminated or truncated:
            return "", reward, terminated, truncated, info
        self._task = task  # keep going on the same task
        feedback = format_feedback(result, self._turn, self.max_turns)
        self._last["prompt"] = feedback
        return feedback, reward, False, False, info

    def _shape(self, score: float, *, last: bool) -> float:
        if self.reward_mode == "final":
            reward = score if last else 0.0
        elif self.reward_mode == "improvement":
            reward = max(0.0, score - self._best)
        else:
            reward = score
        return reward - (self.turn_penalty if self._turn > 1 else 0.0)
