"""pass@k: hand-computed values, agreement with brute force over all k-subsets, bad input."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collimate_rl.errors import CollimateUsageError
from collimate_rl.evaluation import pass_at_k

# (n, c, k, value) worked out by hand as 1 - C(n-c, k) / C(n, k).
HAND = [
    (1, 0, 1, 0.0),
    (1, 1, 1, 1.0),
    (5, 2, 1, 2 / 5),
    (5, 2, 2, 1 - 3 / 10),  # C(3,2)=3, C(5,2)=10
    (4, 1, 2, 1 - 3 / 6),  # C(3,2)=3, C(4,2)=6
    (10, 3, 5, 1 - 21 / 252),  # C(7,5)=21, C(10,5)=252
    (20, 1, 10, 1 - 92378 / 184756),  # = 0.5
    (10, 8, 3, 1.0),  # only 2 wrong samples: every 3-subset holds a correct one
    (200, 0, 100, 0.0),
    (200, 1, 1, 1 / 200),
    (100, 50, 50, 1 - 1 / math.comb(100, 50)),
]


@pytest.mark.parametrize(("n", "c", "k", "value"), HAND)
def test_hand_computed_values(n: int, c: int, k: int, value: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(value, rel=1e-12, abs=1e-15)


def test_large_n_stays_finite_and_monotone() -> None:
    # The binomials overflow a float here; the product form does not.
    values = [pass_at_k(5000, c, 100) for c in (0, 1, 2, 10, 100)]
    assert values[0] == 0.0
    assert all(0.0 < v <= 1.0 for v in values[1:])
    assert values == sorted(values)


def _brute_force(n: int, c: int, k: int) -> Fraction:
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    hits = sum(any(samples[i] for i in subset) for subset in subsets)
    return Fraction(hits, len(subsets))


@given(
    st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n)))
)
def test_matches_the_average_over_all_k_subsets(case: tuple[int, int, int]) -> None:
    n, c, k = case
    assert pass_at_k(n, c, k) == pytest.approx(float(_brute_force(n, c, k)), abs=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k", "match"),
    [
        (3, 1, 4, "at least 4 samples"),
        (3, 4, 1, "c must be in"),
        (3, -1, 1, "c must be in"),
        (3, 1, 0, "k must be >= 1"),
        (3.0, 1, 1, "n must be an int"),
        (3, True, 1, "c must be an int"),
    ],
)
def test_bad_counts_are_usage_errors(n: object, c: object, k: object, match: str) -> None:
    with pytest.raises(CollimateUsageError, match=match):
        pass_at_k(n, c, k)  # type: ignore[arg-type]
