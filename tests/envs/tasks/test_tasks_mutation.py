"""Single-point mutants: each operator, the guarantees (one change, valid code, no duplicates)."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collimate_envs.tasks import MUTATION_OPERATORS, Mutant, load_task_set, mutants

REFERENCES = [t.reference_solution for t in load_task_set("collimate-basic")]


def _by_description(source: str) -> dict[str, str]:
    return {m.description: m.source for m in mutants(source)}


@pytest.mark.parametrize(
    ("source", "description", "expected"),
    [
        ("ok = a < b", "line 1: < -> <=", "ok = a <= b"),
        ("ok = a >= b", "line 1: >= -> >", "ok = a > b"),
        ("ok = a == b", "line 1: == -> !=", "ok = a != b"),
        ("ok = a not in b", "line 1: not in -> in", "ok = a in b"),
        ("ok = a is None", "line 1: is -> is not", "ok = a is not None"),
        ("y = x[3]", "line 1: 3 -> 2", "y = x[2]"),
        ("y = x[0]", "line 1: 0 -> -1", "y = x[-1]"),
        ("y = 0 ** 2", "line 1: 0 -> -1", "y = (-1) ** 2"),
        ("y = a * b", "line 1: * -> +", "y = a + b"),
        ("y = a / b", "line 1: / -> //", "y = a // b"),
        ("y = a % b", "line 1: % -> //", "y = a // b"),
        ("y += a", "line 1: + -> -", "y -= a"),
        ("ok = a or b", "line 1: or -> and", "ok = a and b"),
    ],
)
def test_each_operator_makes_the_documented_change(
    source: str, description: str, expected: str
) -> None:
    assert _by_description(source)[description] == expected


def test_booleans_and_strings_are_not_constants_to_shift() -> None:
    assert mutants("flag = True\nname = 'x'\n") == []


def test_chained_comparisons_mutate_one_operator_at_a_time() -> None:
    sources = {m.source for m in mutants("ok = a < b < c")}
    assert sources == {"ok = a <= b < c", "ok = a < b <= c"}


def test_mutants_come_in_source_order() -> None:
    lines = [m.line for m in mutants("a = 1\nb = x < y\nc = p and q\n")]
    assert lines == sorted(lines) and set(lines) == {1, 2, 3}


def test_invalid_source_raises_syntax_error() -> None:
    with pytest.raises(SyntaxError):
        mutants("def broken(:\n")


class _FoldNegatives(ast.NodeTransformer):
    """``-5`` parses as unary minus applied to 5; fold it into one literal node."""

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if (
            isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) is int
        ):
            return ast.Constant(-node.operand.value)
        return node


def _signature(source: str) -> list[str]:
    """The tree's nodes in walk order, each as its type plus its literal value."""
    tree = _FoldNegatives().visit(ast.parse(source))
    return [
        type(n).__name__ + (repr(n.value) if isinstance(n, ast.Constant) else "")
        for n in ast.walk(tree)
    ]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(REFERENCES))
def test_every_mutant_is_valid_distinct_and_changes_one_node(reference: str) -> None:
    found = mutants(reference)
    original = _signature(reference)
    signatures = [_signature(m.source) for m in found]  # every mutant parses
    assert len({tuple(sig) for sig in signatures}) == len(found)
    for mutant, signature in zip(found, signatures, strict=True):
        assert mutant.operator in MUTATION_OPERATORS
        assert len(signature) == len(original)
        assert sum(a != b for a, b in zip(original, signature, strict=True)) == 1, mutant
    assert mutants(reference) == found  # deterministic


def test_the_bundled_references_give_mutants_of_every_operator() -> None:
    seen = {m.operator for source in REFERENCES for m in mutants(source)}
    assert seen == set(MUTATION_OPERATORS)
    assert all(isinstance(m, Mutant) for m in mutants(REFERENCES[0]))
