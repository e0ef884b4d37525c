"""Independent brute-force oracles for property-tested references.

Property tests compare candidates with the reference, so a wrong reference would silently
teach wrong behaviour. Here each reference is checked against a slow, obviously correct
oracle written separately, on the task's own generated inputs under two seeds.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import _tasks_checker as checker
import pytest

from collimate_envs.tasks import PropertyTests, load_task_set


def _edit_distance(a: str, b: str) -> int:
    @functools.cache
    def d(i: int, j: int) -> int:
        if i == len(a) or j == len(b):
            return len(a) - i + len(b) - j
        return min(d(i + 1, j) + 1, d(i, j + 1) + 1, d(i + 1, j + 1) + (a[i] != b[j]))

    return d(0, 0)


def _lcs(a: str, b: str) -> int:
    @functools.cache
    def d(i: int, j: int) -> int:
        if i == len(a) or j == len(b):
            return 0
        if a[i] == b[j]:
            return 1 + d(i + 1, j + 1)
        return max(d(i + 1, j), d(i, j + 1))

    return d(0, 0)


def _longest_palindrome(s: str) -> str:
    for length in range(len(s), 0, -1):
        for i in range(len(s) - length + 1):
            if s[i : i + length] == s[i : i + length][::-1]:
                return s[i : i + length]
    return ""


def _grid_path(grid: list[str]) -> int:
    rows, cols = len(grid), len(grid[0])
    inf = math.inf
    dist = {(r, c): inf for r in range(rows) for c in range(cols) if grid[r][c] == "."}
    if (0, 0) not in dist or (rows - 1, cols - 1) not in dist:
        return -1
    dist[(0, 0)] = 0
    changed = True
    while changed:  # Bellman-Ford relaxation until nothing improves
        changed = False
        for (r, c), d in dist.items():
            for n in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                if n in dist and dist[n] + 1 < d:
                    dist[(r, c)] = d = dist[n] + 1
                    changed = True
    end = dist[(rows - 1, cols - 1)]
    return -1 if end == inf else int(end)


def _topo(n: int, edges: list[list[int]]) -> list[int]:
    placed: list[int] = []
    while len(placed) < n:
        ready = [
            v
            for v in range(n)
            if v not in placed
            and all(u in placed for u, w in edges if w == v and u != v)
            and [v, v] not in edges
        ]
        if not ready:
            return []
        placed.append(min(ready))
    return placed


def _lis(nums: list[int]) -> int:
    best = [1] * len(nums)
    for j in range(len(nums)):
        for i in range(j):
            if nums[i] < nums[j]:
                best[j] = max(best[j], best[i] + 1)
    return max(best, default=0)


def _knapsack(weights: list[int], values: list[int], capacity: int) -> int:
    best = 0
    for mask in itertools.product((0, 1), repeat=len(weights)):
        w = sum(m * x for m, x in zip(mask, weights, strict=True))
        if w <= capacity:
            best = max(best, sum(m * x for m, x in zip(mask, values, strict=True)))
    return best


def _distances(n: int, edges: list[list[int]], source: int) -> list[int]:
    inf = math.inf
    d = [[0 if i == j else inf for j in range(n)] for i in range(n)]
    for u, v, w in edges:
        d[u][v] = min(d[u][v], w)
        d[v][u] = min(d[v][u], w)
    for k, i, j in itertools.product(range(n), repeat=3):
        d[i][j] = min(d[i][j], d[i][k] + d[k][j])
    return [-1 if x == inf else int(x) for x in d[source]]


def _min_window(s: str, t: str) -> str:
    need = Counter(t)
    found = [
        s[i:j]
        for length in range(1, len(s) + 1)
        for i in range(len(s) - length + 1)
        for j in [i + length]
        if not need - Counter(s[i:j])
    ]
    return found[0] if found else ""


def _segmentations(s: str, words: list[str]) -> int:
    if not s:
        return 1
    return sum(_segmentations(s[len(w) :], words) for w in set(words) if s.startswith(w))


def _sliding(nums: list[int], k: int) -> list[int]:
    return [sorted(nums[i : i + k])[(k - 1) // 2] for i in range(len(nums) - k + 1)]


def _min_coins(coins: list[int], amount: int) -> int:
    frontier, seen, steps = {0}, {0}, 0
    while frontier:
        if amount in frontier:
            return steps
        frontier = {x + c for x in frontier for c in coins if x + c <= amount} - seen
        seen |= frontier
        steps += 1
    return -1


def _islands(grid: list[str]) -> int:
    cells = {(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == "#"}
    parent = {cell: cell for cell in cells}

    def find(x: tuple[int, int]) -> tuple[int, int]:
        while parent[x] != x:
            x = parent[x]
        return x

    for r, c in cells:
        for n in ((r + 1, c), (r, c + 1)):
            if n in cells:
                parent[find(n)] = find((r, c))
    return len({find(cell) for cell in cells})


def _merge(intervals: list[list[int]]) -> list[list[int]]:
    merged = [list(iv) for iv in intervals]
    changed = True
    while changed:
        changed = False
        for a, b in itertools.combinations(range(len(merged)), 2):
            (s1, e1), (s2, e2) = merged[a], merged[b]
            if s1 <= e2 and s2 <= e1:
                merged[a] = [min(s1, s2), max(e1, e2)]
                del merged[b]
                changed = True
                break
    return sorted(merged)


def _next_perm(items: list[int]) -> list[int]:
    perms = sorted(set(itertools.permutations(items)))
    if not perms:
        return []
    index = perms.index(tuple(items))
    return list(perms[(index + 1) % len(perms)])


def _max_subarray(nums: list[int]) -> int:
    return max(sum(nums[i:j]) for i in range(len(nums)) for j in range(i + 1, len(nums) + 1))


def _pair(nums: list[int], target: int) -> list[int]:
    pairs = [
        (j, i)
        for i in range(len(nums))
        for j in range(i + 1, len(nums))
        if nums[i] + nums[j] == target
    ]
    return [min(pairs)[1], min(pairs)[0]] if pairs else []


def _flatten(nested: Any) -> list[int]:
    text = re.sub(r"[\[\], ]+", " ", repr(nested)).split()
    return [int(x) for x in text]


def _floor_mean(nums: list[int]) -> int | None:
    return math.floor(Fraction(sum(nums), len(nums))) if nums else None


def _roman_value(text: str) -> int:
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for a, b in itertools.zip_longest(text, text[1:]):
        total += -values[a] if b and values[a] < values[b] else values[a]
    return total


ORACLES: dict[str, Callable[..., Any]] = {
    "basic/edit-distance": _edit_distance,
    "basic/lcs-length": _lcs,
    "basic/longest-palindrome": _longest_palindrome,
    "basic/grid-shortest-path": _grid_path,
    "basic/smallest-topological-order": _topo,
    "basic/lis-length": _lis,
    "basic/knapsack": _knapsack,
    "basic/shortest-distances": _distances,
    "basic/min-window": _min_window,
    "basic/count-segmentations": _segmentations,
    "basic/sliding-medians": _sliding,
    "basic/min-coins": _min_coins,
    "basic/count-islands": _islands,
    "basic/merge-intervals": _merge,
    "basic/next-permutation": _next_perm,
    "basic/max-subarray-sum": _max_subarray,
    "basic/pair-with-sum": _pair,
    "basic/flatten": _flatten,
    "basic/floor-mean": _floor_mean,
    # Round trips: the answer decodes back to the input.
    "basic/to-base": lambda n, base: n,
    "basic/to-roman": lambda n: n,
    "basic/run-length-encode": lambda s: s,
}
DECODE: dict[str, Callable[..., Any]] = {
    "basic/to-base": lambda out, n, base: int(out, base),
    "basic/to-roman": lambda out, n: _roman_value(out),
    "basic/run-length-encode": lambda out, s: "".join(
        ch * int(k) for ch, k in re.findall(r"(\D)(\d+)", out)
    ),
}

BASIC = load_task_set("collimate-basic")


def test_oracle_for_most_hard_property_tasks() -> None:
    hard = [t.task_id for t in BASIC.filter(difficulty="hard", kind="property")]
    assert set(hard) <= set(ORACLES)


@pytest.mark.parametrize("task_id", sorted(ORACLES))
@pytest.mark.parametrize("seed", [0, 12345])
def test_reference_agrees_with_oracle(task_id: str, seed: int) -> None:
    task = BASIC[task_id]
    spec = task.tests
    assert isinstance(spec, PropertyTests)
    namespace: dict[str, Any] = {}
    exec(compile(spec.reference, task_id, "exec"), namespace)
    reference = namespace[task.entry_point or ""]
    oracle = ORACLES[task_id]
    decode = DECODE.get(task_id)
    for args in checker.generate_inputs(spec, seed):
        got = reference(*copy.deepcopy(args))
        want = oracle(*copy.deepcopy(args))
        if decode is not None:
            got = decode(got, *args)
        assert got == want, f"{task_id}{args!r}: reference {got!r}, oracle {want!r}"
