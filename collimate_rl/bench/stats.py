"""Timing helpers: percentiles, latency samples, closed-loop and batch throughput.

>>> pct([5.0, 1.0, 3.0, 2.0, 4.0], 50)
3.0
>>> s = Summary.of([1.0, 2.0, 3.0, 4.0])
>>> (s.p50, s.p99, s.n)
(2.0, 4.0, 4)
>>> ratio(30.0, 10.0)
3.0
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Summary", "batch_rate", "closed_loop", "latencies_ms", "pct", "ratio"]

T = TypeVar("T")
R = TypeVar("R")


def pct(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` by nearest rank (no interpolation).

    Raises:
        ValueError: ``values`` is empty or ``q`` is outside [0, 100].

    >>> pct([10.0, 20.0], 99)
    20.0
    """
    if not values:
        raise ValueError("pct() of an empty sample")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {q}")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, or NaN when the denominator is not positive.

    >>> math.isnan(ratio(1.0, 0.0))
    True
    """
    return numerator / denominator if denominator > 0 else math.nan


@dataclass(frozen=True)
class Summary:
    """p50, p99 and mean of a latency sample (ms), and its size."""

    p50: float
    p99: float
    mean: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        """Summarise a non-empty sample."""
        return cls(pct(values, 50), pct(values, 99), statistics.fmean(values), len(values))


def latencies_ms(fn: Callable[[], object], n: int, warmup: int = 3) -> list[float]:
    """Call ``fn`` ``warmup`` times, then ``n`` times; the wall time of each of the ``n`` in ms.

    >>> len(latencies_ms(lambda: None, 4, warmup=1))
    4
    """
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def closed_loop(fn: Callable[[], object], clients: int, seconds: float) -> float:
    """Calls per second with ``clients`` threads each calling ``fn`` back to back for ``seconds``.

    A call still running at the deadline is waited for and counted.

    >>> closed_loop(lambda: None, 2, 0.01) > 0
    True
    """
    if clients < 1:
        raise ValueError("clients must be at least 1")
    deadline = time.perf_counter() + seconds
    counts = [0] * clients
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            while time.perf_counter() < deadline:
                fn()
                counts[i] += 1
        except BaseException as exc:  # re-raised in the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sum(counts) / (time.perf_counter() - start)


def batch_rate(fn: Callable[[T], R], items: Iterable[T], workers: int) -> tuple[float, list[R]]:
    """Map ``fn`` over ``items`` with ``workers`` threads: (items per second, results in order).

    >>> rate, out = batch_rate(lambda x: x * 2, [1, 2, 3], workers=2)
    >>> out, rate > 0
    ([2, 4, 6], True)
    """
    todo = list(items)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(1, workers)) as pool:
        results = list(pool.map(fn, todo))
    return len(todo) / (time.perf_counter() - t0), results
