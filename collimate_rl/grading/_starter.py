"""The program a candidate runs when its task gives starter code (HumanEval's ``prompt``).

HumanEval's own harness runs ``prompt + completion``: a sample is the body that continues
the prompt. Chat models answer with the whole function instead, often without the
prompt's imports and helpers. :func:`join_starter` accepts both, the way the benchmark
would if it had been written for chat models:

* the candidate defines the entry point: it runs as written, after the starter's
  imports, helpers and constants (not its stub of the entry point), so anything the
  candidate redefines wins and anything it leaves out is still there;
* it does not: it is the body, run as ``starter + candidate``; a body that lost its
  indentation (to extraction or to a chat model) is indented back under the header.

The starter's helpers also go to the trusted test namespace, so tests that call one of
them (HumanEval/38 calls ``encode_cyclic``) run the benchmark's copy, not the candidate's.

>>> starter = "import math\\n\\ndef hyp(a, b):\\n    \\"\\"\\"Hypotenuse.\\"\\"\\"\\n"
>>> print(join_starter(starter, "return math.hypot(a, b)", "hyp").source)
import math
<BLANKLINE>
def hyp(a, b):
    \"\"\"Hypotenuse.\"\"\"
    return math.hypot(a, b)
>>> joined = join_starter(starter, "def hyp(a, b):\\n    return math.hypot(a, b)", "hyp")
>>> joined.prelude
'import math'
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import textwrap

from collimate_rl.grading._pysource import compiles, describe, parse

__all__ = ["JoinedProgram", "join_starter", "starter_helpers"]


@dataclasses.dataclass(frozen=True)
class JoinedProgram:
    """What the harness runs for one candidate.

    Attributes:
        source: the candidate's program.
        prelude: code run before ``source`` in the candidate's namespace.
        helpers: the starter's helpers, for the trusted test namespace.
    """

    source: str
    prelude: str
    helpers: str


def join_starter(starter_code: str, candidate: str, entry: str) -> JoinedProgram:
    """The program for ``candidate`` under ``starter_code`` (see the module rules).

    Args:
        starter_code: the code the task asked to complete (HumanEval's ``prompt``).
        candidate: the extracted answer: a whole program or a function body.
        entry: the function the tests call.
    """
    helpers = starter_helpers(starter_code, entry)
    if describe(candidate).defines_entry(entry):
        return JoinedProgram(candidate, helpers, helpers)
    head = starter_code if starter_code.endswith("\n") else starter_code + "\n"
    first = next((line for line in candidate.split("\n") if line.strip()), "")
    source = head + candidate
    if first[:1] not in ("", " ", "\t"):
        indented = head + textwrap.indent(candidate, _body_indent(starter_code))
        if compiles(indented) or not compiles(source):
            source = indented
    return JoinedProgram(source, "", helpers)


@functools.lru_cache(maxsize=1024)  # a task's, once per task: its group members share it
def starter_helpers(starter_code: str, entry: str) -> str:
    """``starter_code`` without its stub of ``entry``: imports, helpers, constants.

    >>> starter_helpers("from typing import List\\n\\ndef f(xs: List[int]):\\n    pass\\n", "f")
    'from typing import List'
    >>> starter_helpers("def f(x):\\n", "f")  # a bare header is a stub too
    ''
    """
    text, tree = _parsed(starter_code)
    if tree is None:
        return ""
    lines = text.split("\n")
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, _DEFS) and _is_stub_of(node, entry):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            drop.update(range(first - 1, node.end_lineno or node.lineno))
    kept = [line for row, line in enumerate(lines) if row not in drop]
    return "\n".join(kept).strip("\n").rstrip()


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _is_stub_of(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, entry: str) -> bool:
    return node.name == entry or any(
        isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name == entry
        for sub in ast.walk(node)
    )


def _parsed(starter_code: str) -> tuple[str, ast.Module | None]:
    """The starter and its tree; a header without a body gets a ``pass`` to parse."""
    tree = parse(starter_code)
    if tree is not None:
        return starter_code, tree
    padded = starter_code.rstrip() + "\n" + _body_indent(starter_code) + "pass\n"
    return padded, parse(padded)


def _body_indent(starter_code: str) -> str:
    """The indentation of the body that continues ``starter_code``."""
    last = next((ln for ln in reversed(starter_code.split("\n")) if ln.strip()), "")
    indent = last[: len(last) - len(last.lstrip())]
    return indent + "    " if last.split("#")[0].rstrip().endswith(":") else indent
