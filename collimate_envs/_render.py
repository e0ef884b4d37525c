"""``render_mode="ansi"``: the prompt, the completion and the grade as text."""

from __future__ import annotations

from typing import Any

__all__ = ["render_grade"]

_RULE = "-" * 72


def _clip(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more chars)"


def render_grade(last: dict[str, Any]) -> str:
    """Render what the env last saw and did.

    >>> print(render_grade({"prompt": "Add two numbers."}))
    PROMPT
    ------------------------------------------------------------------------
    Add two numbers.
    """
    parts = ["PROMPT", _RULE, _clip(last.get("prompt", ""))]
    if "completion" in last:
        parts += ["", "COMPLETION", _RULE, _clip(last["completion"])]
    result = last.get("result")
    if result is not None:
        status = "INFRA ERROR" if result.infra_error else f"{result.passed}/{result.total} passed"
        parts += [
            "",
            f"RESULT  reward={float(result.reward):.3f}  {status}  exit_code={result.exit_code}",
            _RULE,
        ]
        tail = getattr(result, "output_tail", "") or ""
        if tail:
            parts.append(_clip(tail))
    return "\n".join(parts)
