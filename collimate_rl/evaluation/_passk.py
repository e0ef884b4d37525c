"""The unbiased pass@k estimator (Chen et al., 2021, "Evaluating Large Language Models
Trained on Code").

With ``n`` samples of which ``c`` are correct, the chance that at least one of ``k``
samples drawn without replacement is correct is ``1 - C(n-c, k) / C(n, k)``. The
binomials overflow floats for large ``n``; the ratio equals the product
``prod_{i=n-c+1}^{n} (1 - k/i)``, which stays in ``[0, 1]`` at every step.

>>> pass_at_k(5, 2, 2)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
0.7
>>> pass_at_k(200, 0, 100), pass_at_k(10, 8, 3)
(0.0, 1.0)
"""

from __future__ import annotations

from collimate_rl.errors import CollimateUsageError

__all__ = ["pass_at_k"]


def _count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CollimateUsageError(f"{name} must be an int, not {type(value).__name__}")
    return value


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``c`` correct samples out of ``n``.

    Args:
        n: samples drawn for the task (``n >= k``).
        c: how many of them are correct (``0 <= c <= n``).
        k: the budget of attempts (``k >= 1``).

    Raises:
        CollimateUsageError: the counts are not ints, or violate the bounds above.

    >>> pass_at_k(1, 1, 1), round(pass_at_k(5, 2, 1), 12)
    (1.0, 0.4)
    """
    n, c, k = _count(n, "n"), _count(c, "c"), _count(k, "k")
    if k < 1:
        raise CollimateUsageError(f"k must be >= 1, not {k}")
    if not 0 <= c <= n:
        raise CollimateUsageError(f"c must be in [0, n={n}], not {c}")
    if n < k:
        raise CollimateUsageError(f"pass@{k} needs at least {k} samples per task, got n={n}")
    if n - c < k:
        return 1.0  # every k-subset contains a correct sample
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss
