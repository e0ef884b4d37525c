"""Single-point mutants of a Python solution: near-miss candidates and a probe of test strength.

Each mutant changes exactly one spot of the source's syntax tree:

==============  =====================================================================
``comparison``  ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``in`` <-> ``not in``,
                ``is`` <-> ``is not``
``constant``    an integer literal ``n`` becomes ``n - 1`` and, separately, ``n + 1``
``arithmetic``  ``+`` <-> ``-``, ``*`` -> ``+``, ``/`` <-> ``//``, ``%`` -> ``//``,
                ``**`` -> ``*`` (in expressions and in augmented assignments such as ``+=``)
``boolean``     ``and`` <-> ``or``
==============  =====================================================================

A mutant can be *equivalent* to the original (it computes the same function, e.g. a changed
bound that no input reaches), so a mutant that passes every test hints at a weak test; it does
not prove one. The mutant's source is regenerated from the tree (``ast.unparse``): comments and
formatting are not kept.

>>> [m.description for m in mutants("def inc(x):\\n    return x + 1\\n")]
['line 2: + -> -', 'line 2: 1 -> 0', 'line 2: 1 -> 2']
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["MUTATION_OPERATORS", "Mutant", "mutants"]

MutationOperator = Literal["comparison", "constant", "arithmetic", "boolean"]
#: The mutation operators, in the order of the module's table.
MUTATION_OPERATORS: Final[tuple[MutationOperator, ...]] = (
    "comparison",
    "constant",
    "arithmetic",
    "boolean",
)

_COMPARISON: Final[dict[type[ast.cmpop], type[ast.cmpop]]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_ARITHMETIC: Final[dict[type[ast.operator], type[ast.operator]]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.Div: ast.FloorDiv,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
}
_BOOLEAN: Final[dict[type[ast.boolop], type[ast.boolop]]] = {ast.And: ast.Or, ast.Or: ast.And}
_SYMBOLS: Final[dict[type[ast.AST], str]] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.And: "and",
    ast.Or: "or",
}


@dataclass(frozen=True)
class Mutant:
    """One single-point change of a program.

    Attributes:
        source: the mutated program (regenerated from its syntax tree).
        operator: which mutation operator made it (see :data:`MUTATION_OPERATORS`).
        line: the line of the original source that changed.
        description: what changed, e.g. ``"line 3: <= -> <"``.

    >>> mutants("ok = a < b\\n")[0]
    Mutant(source='ok = a <= b', operator='comparison', line=1, description='line 1: < -> <=')
    """

    source: str
    operator: MutationOperator
    line: int
    description: str


@dataclass(frozen=True)
class _Site:
    """One possible edit of a parsed tree: where it is, what it changes, and how to make it."""

    operator: MutationOperator
    line: int
    column: int
    before: str
    after: str
    apply: Callable[[], None]


def mutants(source: str) -> list[Mutant]:
    """Every single-point mutant of ``source``, in source order.

    Mutants that come out identical to the original, or to an earlier mutant, are dropped.

    Args:
        source: Python code, e.g. a task's ``reference_solution``.

    Returns:
        The mutants, ordered by where the changed expression starts (line, then column);
        empty when nothing can be mutated.

    Raises:
        SyntaxError: ``source`` is not valid Python.

    >>> [(m.operator, m.source) for m in mutants("ok = a and not b\\n")]
    [('boolean', 'ok = a or not b')]
    >>> mutants("print('hello')\\n")
    []
    """
    seen = {ast.dump(ast.parse(source))}
    count = len(_sites(ast.parse(source)))
    found: list[tuple[int, int, int, Mutant]] = []
    for k in range(count):
        # Each mutant edits its own fresh tree; the sites of a tree are listed in a fixed
        # order (ast.walk), so site k of every parse is the same spot.
        tree = ast.parse(source)
        site = _sites(tree)[k]
        site.apply()
        dumped = ast.dump(tree)
        if dumped in seen:
            continue
        seen.add(dumped)
        mutant = Mutant(
            source=ast.unparse(tree),
            operator=site.operator,
            line=site.line,
            description=f"line {site.line}: {site.before} -> {site.after}",
        )
        found.append((site.line, site.column, k, mutant))
    return [mutant for *_, mutant in sorted(found, key=lambda f: f[:3])]


def _sites(tree: ast.AST) -> list[_Site]:
    sites: list[_Site] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sites.extend(_comparison_sites(node))
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITHMETIC:
            sites.append(_arithmetic_site(node))
        elif isinstance(node, ast.BoolOp) and type(node.op) in _BOOLEAN:
            sites.append(_boolean_site(node))
        for field, value in ast.iter_fields(node):
            sites.extend(_constant_sites(node, field, value))
    return sites


def _comparison_sites(node: ast.Compare) -> list[_Site]:
    sites = []
    for k, op in enumerate(node.ops):
        new = _COMPARISON.get(type(op))
        if new is None:
            continue

        def apply(k: int = k, new: type[ast.cmpop] = new) -> None:
            node.ops[k] = new()

        before, after = _SYMBOLS[type(op)], _SYMBOLS[new]
        sites.append(_Site("comparison", node.lineno, node.col_offset, before, after, apply))
    return sites


def _arithmetic_site(node: ast.BinOp | ast.AugAssign) -> _Site:
    new = _ARITHMETIC[type(node.op)]
    before, after = _SYMBOLS[type(node.op)], _SYMBOLS[new]

    def apply() -> None:
        node.op = new()

    return _Site("arithmetic", node.lineno, node.col_offset, before, after, apply)


def _boolean_site(node: ast.BoolOp) -> _Site:
    new = _BOOLEAN[type(node.op)]
    before, after = _SYMBOLS[type(node.op)], _SYMBOLS[new]

    def apply() -> None:
        node.op = new()

    return _Site("boolean", node.lineno, node.col_offset, before, after, apply)


def _constant_sites(parent: ast.AST, field: str, value: object) -> list[_Site]:
    """The ``n - 1`` and ``n + 1`` edits of every integer literal directly under ``parent``."""
    slots: list[tuple[int, ast.Constant, Callable[[ast.expr], None]]] = []
    if isinstance(value, ast.Constant) and type(value.value) is int:
        slots.append((value.value, value, lambda new: setattr(parent, field, new)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, ast.Constant) and type(item.value) is int:
                slots.append((item.value, item, functools.partial(value.__setitem__, i)))
    sites = []
    for number, literal, put in slots:
        for changed in (number - 1, number + 1):
            sites.append(
                _Site(
                    "constant",
                    literal.lineno,
                    literal.col_offset,
                    repr(number),
                    repr(changed),
                    functools.partial(put, _int_expr(changed)),
                )
            )
    return sites


def _int_expr(number: int) -> ast.expr:
    # A negative number is spelled as unary minus: ast.unparse then parenthesizes it where
    # precedence needs it (``(-1) ** 2``), which a negative Constant would not get.
    if number < 0:
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(-number))
    return ast.Constant(number)
