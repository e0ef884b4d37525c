"""Reading candidate source on the client: every node, each recent source once, and safe
from many grading threads at once."""

from __future__ import annotations

import ast
import gc
import threading
import time

from collimate_rl.grading._pysource import describe, parse


class _Cycle:
    """Garbage whose collection runs Python code, so a thread may switch mid-parse."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        time.sleep(0)


def test_parsing_from_many_threads_never_trips_cpython_ast_state() -> None:
    # CPython 3.11 keeps ast.parse's recursion depth per interpreter: a thread switch inside
    # AST construction (a finalizer run by the GC) made grade_batch fail with "AST
    # constructor recursion depth mismatch" (python/cpython#106905). parse() serializes.
    source = "\n".join(
        f"def f{i}(x):\n    return [y for y in range(x) if y % {i + 2}]" for i in range(60)
    )
    errors: list[BaseException] = []
    deadline = time.monotonic() + 2.0

    def work() -> None:
        rounds = 0
        while time.monotonic() < deadline and not errors:
            [_Cycle() for _ in range(20)]
            rounds += 1
            fresh = f"{source}\n# {threading.get_ident()} {rounds}"  # parsed, not remembered
            try:
                assert parse(fresh) is not None
                assert "f0" in describe(fresh).defines
            except BaseException as exc:
                errors.append(exc)

    threshold = gc.get_threshold()
    gc.set_threshold(50, 5, 5)
    try:
        threads = [threading.Thread(target=work) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        gc.set_threshold(*threshold)
    assert errors == []


def test_the_node_walk_reaches_every_node_ast_walk_does() -> None:
    from collimate_envs.tasks import load_task_set
    from collimate_rl.grading._pysource import _nodes

    for task in load_task_set("humaneval"):
        for source in (task.reference_solution or "", str(task.starter_code or "")):
            tree = parse(source)
            assert tree is not None
            assert {id(n) for n in _nodes(tree)} == {id(n) for n in ast.walk(tree)}


def test_recent_sources_are_read_once_and_large_ones_every_time() -> None:
    small = "def f(x):\n    return g(x)\n"
    assert describe(small) is describe(small)
    assert parse(small) is parse(small)
    assert describe(small).needs == {"g"}
    large = small + "#" * (64 << 10)
    assert parse(large) is not parse(large)
    assert describe(large) is not describe(large)
    assert describe(large).needs == describe(small).needs
