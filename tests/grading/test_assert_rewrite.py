"""The harness's assert rewrite: every assert becomes a recorded check, located where it was.

A check's failure is reported by the assert's line, and a traceback inside test code points at
it, so every node the rewrite makes carries the assert's location, while the assert's own test
expression keeps its own.
"""

from __future__ import annotations

import ast
import json

from collimate_rl.grading._asserts import _rewrite_asserts

NESTED = """
def check(candidate):
    assert candidate(1) == 2, "one"
    for i in range(3):
        if i:
            assert candidate(i) > i
        else:
            with ctx():
                assert candidate(i) is not None
    try:
        assert candidate(-1) == 0
    except ValueError:
        assert False
    else:
        assert True
    finally:
        assert 1
    match i:
        case 2:
            assert candidate(
                2
            ) == 4
    lam = lambda: 0
"""

LOCATION = ("lineno", "col_offset", "end_lineno", "end_col_offset")


def _location(node: ast.AST) -> tuple[int, ...]:
    return tuple(getattr(node, field) for field in LOCATION)


def _check_block(source: str) -> None:
    asserts = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Assert)]
    tree, count = _rewrite_asserts(ast.parse(source))
    assert count == len(asserts)
    assert not any(isinstance(n, ast.Assert) for n in ast.walk(tree))
    checks = [n for n in ast.walk(tree) if isinstance(n, ast.Try) and _is_check(n)]
    assert len(checks) == len(asserts)
    for check, original in zip(checks, asserts, strict=True):
        where = _location(original)
        assign = check.body[0]  # __collimate_ok__ = bool(<the assert's test>)
        assert isinstance(assign, ast.Assign) and isinstance(assign.value, ast.Call)
        own_test = assign.value.args[0]
        assert ast.dump(own_test) == ast.dump(original.test)
        assert _location(own_test) == _location(original.test)
        inside_test = {id(n) for n in ast.walk(own_test)}
        for node in ast.walk(check):
            if id(node) not in inside_test and "lineno" in node._attributes:
                assert _location(node) == where, (ast.dump(node), where)
    compile(tree, "<tests 0>", "exec")


def _is_check(node: ast.Try) -> bool:
    target = node.body[0]
    return isinstance(target, ast.Assign) and getattr(target.targets[0], "id", "") == (
        "__collimate_ok__"
    )


def test_every_node_of_a_check_sits_at_its_assert() -> None:
    _check_block(NESTED)


def test_humanevals_blocks_rewrite_with_their_locations() -> None:
    from collimate_envs.tasks import load_task_set

    for task in load_task_set("humaneval"):
        payload = json.loads(task.to_reward_spec().build("pass").files[0]["content"])
        for block in payload["blocks"]:
            _check_block(block["code"])
