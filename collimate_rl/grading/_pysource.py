"""Read Python source without running it: does it parse, what it defines, what it uses.

Shared by code extraction (:mod:`collimate_rl.grading.extract`) and the starter-code rules
(:mod:`collimate_rl.grading._starter`). Every function is total: source that does not
parse (or is too deep for the parser) gets a line-based approximation, never an exception.

>>> info = describe("import math\\ndef area(r):\\n    return math.pi * r * r\\n")
>>> sorted(info.defines), sorted(info.needs)
(['area', 'math'], [])
>>> describe("print(area(2))").needs == {"print", "area"}
True
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import keyword
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["SourceInfo", "compiles", "describe", "is_incomplete", "parse", "parse_or_error"]

_INCOMPLETE = (
    "was never closed",
    "unterminated triple-quoted",
    "expected an indented block",
    "unexpected EOF",
)
_DEF_LINE = re.compile(r"^(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)", re.M)
_ANY_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)", re.M)
_ASSIGN_LINE = re.compile(r"^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)", re.M)
_IMPORT_LINE = re.compile(r"^(?:from[ \t]+\S+[ \t]+)?import[ \t]+([^\n#]+)", re.M)
_WORD = re.compile(r"[A-Za-z_]\w*")


#: CPython 3.11 keeps ``ast.parse``'s recursion depth in per-interpreter state, so parses in
#: two threads at once (grade_batch's, a vector env's) can fail with a spurious "AST
#: constructor recursion depth mismatch" SystemError (python/cpython#106905). Ours take turns.
_PARSING = threading.Lock()

#: Preparing one grade reads the same source several times (extraction, the starter rules,
#: the names the tests proxy), each a parse of ~0.1 ms: the last few results are kept, for
#: sources up to this size (a tree takes ~25x its source's memory).
_MEMO_MAX_CHARS = 64 << 10
_MEMO_SIZE = 32

T = TypeVar("T")


def _remember_recent(read: Callable[[str], T]) -> Callable[[str], T]:
    """``read``, keeping its results for the last few small sources (shared between callers)."""
    recent = functools.lru_cache(maxsize=_MEMO_SIZE)(read)

    @functools.wraps(read)
    def reader(source: str) -> T:
        return read(source) if len(source) > _MEMO_MAX_CHARS else recent(source)

    return reader


@_remember_recent
def parse_or_error(source: str) -> ast.Module | SyntaxError:
    """The module's syntax tree, or the :class:`SyntaxError` that stops it.

    Trees of recent sources are shared between callers: read them, never change them.

    >>> parse_or_error("x = (").msg
    "'(' was never closed"
    >>> parse_or_error("x = 1") is parse_or_error("x = 1")
    True
    """
    try:
        with _PARSING:
            return ast.parse(source)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, too deep
        return SyntaxError(f"{type(exc).__name__}: {exc}")


def parse(source: str) -> ast.Module | None:
    """The module's syntax tree, or ``None`` when ``source`` does not parse.

    >>> parse("x = (") is None, parse("x = 1") is not None
    (True, True)
    """
    tree = parse_or_error(source)
    return None if isinstance(tree, SyntaxError) else tree


def compiles(source: str) -> bool:
    """Whether ``source`` compiles as a module (stricter than :func:`parse`: a bare
    ``return`` parses but does not compile).

    >>> compiles("return 1"), compiles("def f():\\n    return 1")
    (False, True)
    """
    try:
        compile(source, "<candidate>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    return True


def is_incomplete(source: str) -> bool:
    """Whether ``source`` fails to parse only because it stops too early.

    An open bracket, an open triple-quoted string or a block header without its body:
    more lines could complete it.

    >>> is_incomplete("total = sum(("), is_incomplete("def f(x):"), is_incomplete("Here's how:")
    (True, True, False)
    """
    error = parse_or_error(source)
    return isinstance(error, SyntaxError) and any(m in str(error.msg) for m in _INCOMPLETE)


@dataclasses.dataclass(frozen=True)
class SourceInfo:
    """What a piece of source binds at module level and which free names it reads.

    Attributes:
        tree: the syntax tree, or ``None`` when the source does not parse.
        defines: names bound at module level (functions, classes, assignments, imports).
        defined_anywhere: every function or class name, at any depth (a method counts).
        needs: names read but bound nowhere in the source (builtins included).
    """

    tree: ast.Module | None
    defines: frozenset[str]
    defined_anywhere: frozenset[str]
    needs: frozenset[str]

    def defines_entry(self, entry: str) -> bool:
        """Whether the source defines ``entry``: at module level, or as a method.

        >>> describe("class Solution:\\n    def solve(self):\\n        pass").defines_entry("solve")
        True
        """
        return entry in self.defines or entry in self.defined_anywhere


@_remember_recent
def describe(source: str) -> SourceInfo:
    """Analyse ``source`` (exactly when it parses, by its lines when it does not).

    Recent sources' results are shared, as :func:`parse_or_error`'s trees are.
    """
    tree = parse(source)
    if tree is None:
        return _describe_lines(source)
    top: set[str] = set()
    for node in tree.body:
        top.update(_bound_at_top(node))
    anywhere, bound, loaded = _names(tree)
    return SourceInfo(tree, frozenset(top), frozenset(anywhere), frozenset(loaded - bound - top))


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_IMPORTS = (ast.Import, ast.ImportFrom)
#: Fields that never hold a name: expression contexts and operators.
_LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}


def _names(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """Every function and class name; every name bound; every name read (any depth).

    One pass over the nodes that can hold a name, in no set order: it skips expression
    contexts, operators and constants, which are most of a tree's nodes, and tests each
    node's type once (about half the time of a full walk with ``isinstance`` tests).
    """
    anywhere: set[str] = set()
    bound: set[str] = set()
    loaded: set[str] = set()
    todo: list[ast.AST] = [tree]
    node_kind, name_kind, load_kind, constant_kind = ast.AST, ast.Name, ast.Load, ast.Constant
    while todo:
        node: Any = todo.pop()
        kind = type(node)
        if kind is name_kind:
            (loaded if type(node.ctx) is load_kind else bound).add(node.id)
            continue
        if kind is constant_kind:
            continue
        if kind in _DEFINITIONS:
            anywhere.add(node.name)
            bound.add(node.name)
        elif kind is ast.arg:
            bound.add(node.arg)
        elif kind in _IMPORTS:
            bound.update(_import_names(node))
            continue
        elif kind is ast.ExceptHandler and node.name:
            bound.add(node.name)
        fields = _CHILD_FIELDS.get(kind)
        if fields is None:
            fields = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
            _CHILD_FIELDS[kind] = fields
        for field in fields:
            value = getattr(node, field, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, node_kind):
                        todo.append(item)
            elif isinstance(value, node_kind):
                todo.append(value)
    return anywhere, bound, loaded


def _bound_at_top(node: ast.stmt) -> set[str]:
    """Names one module-level statement binds (not those bound inside its functions)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return _import_names(node)
    names: set[str] = set()
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Name) and not isinstance(current.ctx, ast.Load):
            names.add(current.id)
        elif isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(current.name)  # defined inside an if/try at module level
            continue
        elif isinstance(current, (ast.Import, ast.ImportFrom)):
            names.update(_import_names(current))
        elif isinstance(current, ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(current))
    return names


def _import_names(node: ast.Import | ast.ImportFrom) -> set[str]:
    return {(alias.asname or alias.name).split(".")[0] for alias in node.names}


def _describe_lines(source: str) -> SourceInfo:
    top = set(_DEF_LINE.findall(source)) | set(_ASSIGN_LINE.findall(source))
    for imported in _IMPORT_LINE.findall(source):
        for part in imported.strip("() \t").split(","):
            words = part.split()
            if words:
                top.add((words[-1] if "as" in words else words[0]).split(".")[0])
    anywhere = set(_ANY_DEF.findall(source))
    words = {w for w in _WORD.findall(source) if not keyword.iskeyword(w)}
    return SourceInfo(None, frozenset(top), frozenset(anywhere), frozenset(words - top - anywhere))
