"""Small helpers shared by the benchmark scripts (percentiles, closed-loop throughput, tables)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence

__all__ = ["closed_loop", "latencies_ms", "pct", "table"]


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def latencies_ms(fn: Callable[[], object], n: int, warmup: int = 5) -> list[float]:
    """Run ``fn`` sequentially ``n`` times after ``warmup`` runs; per-call wall time in ms."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def closed_loop(fn: Callable[[], object], clients: int, seconds: float) -> float:
    """Calls per second with ``clients`` threads each calling ``fn`` back to back."""
    deadline = time.perf_counter() + seconds
    counts = [0] * clients

    def worker(i: int) -> None:
        while time.perf_counter() < deadline:
            fn()
            counts[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def summary(values: Sequence[float]) -> tuple[str, str, str]:
    """(p50, p99, mean) formatted in ms."""
    return f"{pct(values, 50):.2f}", f"{pct(values, 99):.2f}", f"{statistics.fmean(values):.2f}"
