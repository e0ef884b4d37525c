"""Pull the program out of a chat model's raw output: drop the prose, keep all the code.

>>> extract_code("Here:\\n```python\\ndef solve(x):\\n    return x\\n```\\nDone.")
'def solve(x):\\n    return x'
>>> print(extract_code("Use a helper.\\nimport math\\ndef r(x):\\n    return math.sqrt(x)\\nThat's it."))
import math
def r(x):
    return math.sqrt(x)
"""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap
from typing import Literal

from collimate_rl.grading._pysource import SourceInfo, describe, is_incomplete, parse
from collimate_rl.grading.languages import FENCE_TAGS

__all__ = ["extract_code"]

_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*\{?\.?([^\s`{}]*)")
_ALIASES = {"python": ("python", "py", "python3", "py3", "python2", "ipython", "pycon")}
_ALIASES.update(FENCE_TAGS)  # type: ignore[arg-type]  # c, cpp, java, javascript, rust, bash, go
#: A column-0 line that continues the statement above it rather than starting one.
_CONTINUES = re.compile(r"^(?:[)\]}]|(?:else|elif|except|finally)\b)")
#: Lines that start a statement even when broken (a missing colon is code, not prose).
_STATEMENT = re.compile(
    r"@[A-Za-z_]|(?:async\s+)?def\s+[A-Za-z_]\w*\s*\(|class\s+[A-Za-z_]\w*\s*[(:]"
    r"|import\s+[A-Za-z_][\w.]*\s*(?:$|[,#;]|as\s)|from\s+\.*[\w.]*\s+import\s"
    r"|(?:if|elif|while|for|with|try|except|finally|else)\b[^\n]*:\s*(?:#.*)?$"
)
#: How an unfinished statement starts: a target and ``=``, a call, a keyword, a bracket.
_UNFINISHED = re.compile(
    r"[(\[{'\"]|(?:return|yield|raise|assert|del|await|lambda|print)\b"
    r"|[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*(?:,\s*[A-Za-z_][\w.]*\s*)*"
    r"(?:[-+*/%&|^@]|//|\*\*|>>|<<)?=(?!=)|[A-Za-z_][\w.]*[(\[]"
)
_PROMPT = re.compile(r"^(?:>>>|\.\.\.)(?: |$)")
#: Merging chunks to complete an open bracket or string stops after this many, and one
#: completion gets this many merge attempts in all (a text of open brackets stays linear).
_MAX_MERGE = 60
_MERGE_BUDGET = 600


def _tag_matches(tag: str, language: str | None) -> bool:
    if language is None:
        return True
    wanted = _ALIASES.get(language.lower(), (language.lower(),))
    return tag.lower() in wanted


def _is_python(language: str | None) -> bool:
    return language is None or language.lower() in _ALIASES["python"]


def extract_code(
    completion: str,
    *,
    entry: str | None = None,
    language: str | None = "python",
    which: Literal["last", "first"] = "last",
) -> str:
    """Return the program in ``completion``, a chat model's raw output.

    Only prose is dropped: imports, helpers, classes and constants stay, in
    their order, whether the code is fenced or not.

    1. **Fenced blocks** (```` ``` ```` or ``~~~``, indented or not, e.g. inside
       a list item): the blocks tagged ``language`` (aliases such as ``py``
       count), failing those the untagged ones; ``language=None`` takes any
       tag. A fence left open (a truncated generation) is a block to the end.
    2. **No eligible fence**: the text itself, cut into runs of code. A line
       is prose when it does not parse as Python and does not start a
       statement (``Here's the fix:``, ``>>> f(2)``, ``Output: 6``); so is a
       statement that can only fail, such as a bare name (``Solution``) or an
       annotation without a value (``Complexity: O(n)``). Indented code under a
       prose line (a list item) is code. Code that starts a statement but is
       broken stays, so a syntax error is graded, not hidden.
    3. **Which pieces** (blocks or runs): the one defining ``entry`` (a
       function, class or assignment of that name; the ``which`` of several,
       preferring ones that parse), else the ``which`` piece (``"last"`` by
       default, ``"first"``). Then every other piece that defines a name the
       chosen ones use but do not define (a helper block, an import run), until
       nothing is missing, in document order. Pieces nobody needs (a usage
       example, a test block) are dropped.

    A Python piece that does not parse and reads like a REPL session
    (``>>> `` / ``... `` prompts) becomes the code typed at the prompts. Each
    piece loses its common indentation and its blank edges; pieces are joined
    by a blank line. Only rule 1 applies to other languages (their text is
    otherwise returned whole).

    Body-only answers (HumanEval's sample format) come back dedented; a spec
    with ``starter_code`` (see :class:`~collimate_rl.grading.UnitTestReward`)
    puts them back under the function header.

    Args:
        completion: the model's text.
        entry: the name the grader calls (its defining piece is the program).
        language: the fence tag to look for, or ``None`` for any.
        which: ``"last"`` or ``"first"`` among several eligible pieces.

    >>> text = "```python\\nx = 1\\n```\\nthen\\n```python\\nx = 2\\n```"
    >>> extract_code(text), extract_code(text, which="first")
    ('x = 2', 'x = 1')
    >>> extract_code("```bash\\nls\\n```\\n```python\\nprint(2)\\n```")
    'print(2)'
    >>> extract_code("```python\\ndef solve():\\n    return 1")  # truncated
    'def solve():\\n    return 1'
    >>> blocks = "```python\\ndef h(x):\\n    return x\\n```\\nand\\n```python\\ndef f(x):\\n    return h(x)\\n```\\nUsage:\\n```python\\nprint(f(1))\\n```"
    >>> print(extract_code(blocks, entry="f"))
    def h(x):
        return x
    <BLANKLINE>
    def f(x):
        return h(x)
    >>> extract_code("Solution\\ndef f(x):\\n    return x\\n>>> f(2)\\n2", entry="f")
    'def f(x):\\n    return x'
    >>> extract_code("    return x + 1\\n")  # a body, as HumanEval samples are
    'return x + 1'
    """
    if which not in ("last", "first"):
        raise ValueError(f"which must be 'last' or 'first', not {which!r}")
    lines = completion.replace("\r\n", "\n").split("\n")
    fences = _fences(lines)
    tagged = [f for f in fences if f.tag and _tag_matches(f.tag, language)]
    untagged = [f for f in fences if not f.tag]
    chosen = tagged or untagged
    python = _is_python(language)
    if chosen:
        texts = [_clean("\n".join(f.body)) for f in chosen]
        if not python:
            if entry is not None:  # prefer the blocks that name the entry
                texts = [t for t in texts if _names_entry(t, entry)] or texts
            return texts[-1] if which == "last" else texts[0]
        pieces = [_Piece(i, t, describe(t)) for i, t in enumerate(map(_from_session, texts))]
    elif not python:
        return _clean(completion.replace("\r\n", "\n"))
    else:
        runs: list[list[str]] = []
        start = 0
        budget = _Budget(_MERGE_BUDGET)
        for fence in [*fences, None]:  # other languages' blocks separate the runs
            stop = fence.first if fence else len(lines)
            runs.extend(_code_runs(lines[start:stop], budget))
            start = fence.last + 1 if fence else stop
        texts = [_clean("\n".join(run)) for run in runs]
        pieces = [_Piece(i, t, describe(t)) for i, t in enumerate(texts) if t]
    return "\n\n".join(p.text for p in _select(pieces, entry, which) if p.text)


# --------------------------------------------------------------------------- fences


def _names_entry(text: str, entry: str) -> bool:
    pattern = rf"\b(?:def|class)\s+{re.escape(entry)}\b|^{re.escape(entry)}\s*="
    return re.search(pattern, text, re.M) is not None


@dataclasses.dataclass(frozen=True)
class _Fence:
    tag: str
    first: int  # index of the opening line
    last: int  # index of the closing line (the last line when left open)
    body: list[str]


def _fences(lines: list[str]) -> list[_Fence]:
    """Fenced blocks, CommonMark-style: closed by a run of the same character, at least as long."""
    fences = []
    index = 0
    while index < len(lines):
        opened = _OPEN.match(lines[index])
        if not opened or (opened.group(1)[0] == "`" and "`" in lines[index][opened.end() :]):
            index += 1
            continue
        marker = opened.group(1)
        close = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
        end = index + 1
        while end < len(lines) and not close.match(lines[end]):
            end += 1
        last = min(end, len(lines) - 1)
        fences.append(_Fence(opened.group(2), index, last, lines[index + 1 : end]))
        index = end + 1
    return fences


def _clean(text: str) -> str:
    """Without common indentation, blank edges and trailing spaces."""
    return textwrap.dedent(text).strip("\n").rstrip()


def _from_session(text: str) -> str:
    """The code typed at ``>>>`` prompts, when ``text`` is a REPL session; else ``text``."""
    first = next((ln for ln in text.split("\n") if ln.strip()), "")
    if not _PROMPT.match(first) or parse(text) is not None:
        return text
    return "\n".join(ln[4:] for ln in text.split("\n") if _PROMPT.match(ln))


# --------------------------------------------------------------------------- unfenced text


@dataclasses.dataclass
class _Budget:
    merges: int


def _code_runs(lines: list[str], budget: _Budget) -> list[list[str]]:
    """The code in ``lines`` as runs of lines; prose lines end a run and are dropped."""
    if not any(ln.strip() for ln in lines):
        return []
    tree = parse(textwrap.dedent("\n".join(lines)))
    if tree is not None:
        return _split_at_inert(lines, tree)
    runs: list[list[str]] = [[]]
    chunks = _chunks(lines)
    index = 0
    while index < len(chunks):
        start, end = chunks[index]
        used, tree = _complete(lines, chunks, index, budget)
        if tree is not None:
            end = chunks[index + used - 1][1]
            found = _split_at_inert(lines[start:end], tree)
            runs[-1].extend(found[0])
            runs.extend(found[1:])
            index += used
            continue
        head = lines[start]
        if _starts_code(head):  # broken code: keep it, the grade reports the error
            runs[-1].extend(lines[start:end])
        else:  # a prose line; indented lines under it may be code (a list item)
            runs.append([])
            tail = textwrap.dedent("\n".join(lines[start + 1 : end])).split("\n")
            runs.extend(_code_runs(tail, budget))
            runs.append([])
        index += 1
    return [run for run in runs if any(ln.strip() for ln in run)]


def _chunks(lines: list[str]) -> list[tuple[int, int]]:
    """``(start, end)`` line ranges, each a column-0 line and the indented lines under it."""
    starts = [0] + [
        i
        for i, ln in enumerate(lines)
        if i and ln[:1] not in ("", " ", "\t") and not _CONTINUES.match(ln)
    ]
    starts = [s for k, s in enumerate(starts) if not (k and lines[starts[k - 1]].startswith("@"))]
    return list(zip(starts, [*starts[1:], len(lines)], strict=True))


def _complete(
    lines: list[str], chunks: list[tuple[int, int]], index: int, budget: _Budget
) -> tuple[int, ast.Module | None]:
    """Parse chunk ``index``, joined to the next ones while it is only unfinished
    (an open bracket or string); returns how many chunks were used and the tree."""
    start = chunks[index][0]
    for used in range(1, min(_MAX_MERGE, len(chunks) - index) + 1):
        if used > 1:
            if budget.merges <= 0:
                break
            budget.merges -= 1
        text = textwrap.dedent("\n".join(lines[start : chunks[index + used - 1][1]]))
        tree = parse(text)
        if tree is not None:
            return used, tree
        if used == 1 and not _starts_code(lines[start]):
            break
        if not is_incomplete(text):
            break
    return 1, None


def _starts_code(line: str) -> bool:
    """Whether ``line`` alone is, or begins, a Python statement that does something."""
    text = line.strip()
    if not text:
        return False
    if _STATEMENT.match(text):
        return True
    tree = parse(text)
    if tree is None:  # unfinished code, not prose with an open parenthesis
        return _UNFINISHED.match(text) is not None and is_incomplete(text)
    return not any(_inert(node) for node in tree.body)


def _inert(node: ast.stmt) -> bool:
    """A statement that can do nothing but fail: read like prose that happens to parse."""
    if isinstance(node, ast.AnnAssign):
        return node.value is None and isinstance(node.target, ast.Name)
    if not isinstance(node, ast.Expr):
        return False
    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return False  # a docstring
    active = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr, ast.Lambda)
    return not any(isinstance(sub, active) for sub in ast.walk(node.value))


def _split_at_inert(lines: list[str], tree: ast.Module) -> list[list[str]]:
    """``lines`` (which parse as ``tree``) as runs, cut where an inert statement stands alone."""
    prose: set[int] = set()
    taken: dict[int, int] = {}
    for node in tree.body:
        for row in range(node.lineno - 1, (node.end_lineno or node.lineno)):
            taken[row] = taken.get(row, 0) + 1
    for node in tree.body:
        rows = range(node.lineno - 1, (node.end_lineno or node.lineno))
        if _inert(node) and all(taken[row] == 1 for row in rows):
            prose.update(rows)
    runs: list[list[str]] = [[]]
    for row, line in enumerate(lines):
        if row in prose:
            runs.append([])
        else:
            runs[-1].append(line)
    return [run for run in runs if any(ln.strip() for ln in run)] or [[]]


# --------------------------------------------------------------------------- choosing pieces


@dataclasses.dataclass(frozen=True)
class _Piece:
    position: int
    text: str
    info: SourceInfo


def _select(pieces: list[_Piece], entry: str | None, which: str) -> list[_Piece]:
    """The main piece plus the pieces defining what it needs, in document order."""
    if not pieces:
        return []
    candidates = pieces
    if entry is not None:
        defining = [p for p in pieces if p.info.defines_entry(entry)]
        candidates = [p for p in defining if p.info.tree is not None] or defining or pieces
    main = candidates[-1] if which == "last" else candidates[0]
    chosen = {main.position}
    while True:
        defined = set().union(*(pieces[i].info.defines for i in chosen))
        needed = set().union(*(pieces[i].info.needs for i in chosen)) - defined
        more = {
            p.position
            for p in pieces
            if p.position not in chosen
            and p.info.defines & needed
            # another draft of the entry may only come before the chosen one
            and not (entry and p.info.defines_entry(entry) and p.position > main.position)
        }
        if not more:
            return [p for p in pieces if p.position in chosen]
        chosen |= more
