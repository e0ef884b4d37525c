"""Reading candidate source on the client: safe from many grading threads at once."""

from __future__ import annotations

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
        while time.monotonic() < deadline and not errors:
            [_Cycle() for _ in range(20)]
            try:
                assert parse(source) is not None
                assert "f0" in describe(source).defines
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
