"""Reading candidate source on the client: every node, each recent source once, and safe
from many grading threads at once."""

from __future__ import annotations

import ast
import gc
import sys
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


def _names_by_walk(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """The reference for ``_names``: every node by ast.walk, tested one by one."""
    anywhere: set[str] = set()
    bound: set[str] = set()
    loaded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            anywhere.add(node.name)
            bound.add(node.name)
        elif isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return anywhere, bound, loaded


_EVERY_FORM = """
import os.path as p, sys
from a.b import (c as d, e)
@deco(x := 1)
async def f(a, /, b: int = g(), *args: T, k=h, **kw) -> R:
    global G
    nonlocal_ = [y async for y in aiter(z) if y]
    async with m() as (n, o), q:
        await r
    lam = lambda s, *t, u=v: s + w
    {i: j for i, j in items if i} | {*star}
    match subject:
        case Point(x=px, y=[1, *rest]) | {"k": kv, **others} if guard(px):
            pass
        case str() as named:
            del named
    try:
        raise E from F
    except* (ValueError, TypeError) as eg:
        print(f"{eg!r:>{width}}", eg.args[0])
    finally:
        aug += 1
class C(Base, metaclass=Meta):
    attr: Ann = default
    def method(self): return super().method()
for i, (j, k) in enumerate(pairs):
    while i < j: i -= not k
else:
    assert i, msg
"""
if sys.version_info < (3, 11):  # except* (an ast.TryStar) is 3.11 syntax
    _EVERY_FORM = _EVERY_FORM.replace("except*", "except")


def test_the_name_pass_finds_what_ast_walk_finds() -> None:
    import os

    from collimate_envs.tasks import load_task_set
    from collimate_rl.grading._pysource import _names

    sources = [_EVERY_FORM]
    for task in load_task_set("humaneval"):
        sources += [task.reference_solution or "", str(task.starter_code or "")]
    stdlib = os.path.dirname(ast.__file__)
    for name in sorted(os.listdir(stdlib))[:80]:  # a spread of real modules
        if name.endswith(".py"):
            with open(os.path.join(stdlib, name), encoding="utf-8") as handle:
                sources.append(handle.read())
    for source in sources:
        tree = ast.parse(source)
        assert _names(tree) == _names_by_walk(tree), source[:200]
    info = describe(_EVERY_FORM)
    assert {"p", "sys", "d", "e", "f", "C", "i", "j", "k"} <= info.defines
    assert {"f", "C", "method"} <= info.defined_anywhere
    read = {"deco", "g", "h", "aiter", "z", "m", "r", "v", "w", "items", "star", "subject"}
    read |= {"guard", "E", "F", "width", "pairs", "msg", "Base", "Meta", "Ann", "default"}
    assert read | {"print", "enumerate", "super"} <= info.needs
    assert {"a", "b", "s", "t", "u", "y", "n", "o", "eg", "lam", "aug", "x"}.isdisjoint(info.needs)


def test_recent_sources_are_read_once_and_large_ones_every_time() -> None:
    small = "def f(x):\n    return g(x)\n"
    assert describe(small) is describe(small)
    assert parse(small) is parse(small)
    assert describe(small).needs == {"g"}
    large = small + "#" * (64 << 10)
    assert parse(large) is not parse(large)
    assert describe(large) is not describe(large)
    assert describe(large).needs == describe(small).needs
