"""Code extraction from a chat model's raw output: only the prose goes."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collimate_rl.grading import UnitTestReward, extract_code, grade_batch

from .conftest import TEMPLATE

code_lines = st.lists(
    st.text(
        alphabet=st.characters(
            blacklist_characters="`~\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
            blacklist_categories=("Cs",),
        ),
        min_size=1,
        max_size=30,
    ).filter(lambda s: s.strip()),
    min_size=1,
    max_size=6,
).filter(lambda lines: not lines[0].lstrip().startswith((">>>", "...")))
fence_prose = st.text(alphabet="abc xyz.,!?\n", max_size=40)


def _clean(text: str) -> str:
    return textwrap.dedent(text).strip("\n").rstrip()


@given(
    before=fence_prose,
    after=fence_prose,
    lines=code_lines,
    tag=st.sampled_from(["python", "py", "Python3", "{python}"]),
)
def test_a_fenced_block_is_taken_verbatim_but_dedented(
    before: str, after: str, lines: list[str], tag: str
) -> None:
    body = "\n".join(lines)
    completion = f"{before}\n```{tag}\n{body}\n```\n{after}"
    assert extract_code(completion) == _clean(body)


def _assignments(prefix: str, values: list[int]) -> str:
    return "\n".join(f"{prefix}{i} = {v}" for i, v in enumerate(values))


@given(first=st.lists(st.integers(), min_size=1), last=st.lists(st.integers(), min_size=1))
def test_the_last_of_independent_blocks_wins_by_default(first: list[int], last: list[int]) -> None:
    a, b = _assignments("a", first), _assignments("b", last)
    completion = f"```python\n{a}\n```\nrevised:\n```python\n{b}\n```"
    assert extract_code(completion) == b
    assert extract_code(completion, which="first") == a


def test_python_blocks_beat_other_languages_and_untagged() -> None:
    text = "```\nuntagged\n```\n```python\nx = 1\n```\n```bash\nrm -rf /\n```"
    assert extract_code(text) == "x = 1"
    assert extract_code("```bash\nls\n```\n```\ny = 2\n```") == "y = 2"
    assert extract_code("```bash\nls\n```", language="bash") == "ls"
    assert extract_code("```rust\nfn main(){}\n```", language=None) == "fn main(){}"
    assert extract_code("```python title='a.py'\nz = 3\n```") == "z = 3"


def test_the_entry_block_and_the_blocks_it_needs() -> None:
    text = "```python\ndef solve():\n    return 1\n```\nusage:\n```python\nprint(solve())\n```"
    assert extract_code(text, entry="solve") == "def solve():\n    return 1"
    # Without an entry the last block is the program, with what it uses.
    assert extract_code(text) == "def solve():\n    return 1\n\nprint(solve())"
    helper_then_solution = (
        "First a helper:\n```python\nimport math\n\ndef root(x):\n    return math.isqrt(x)\n```\n"
        "Then:\n```python\ndef solve(x):\n    return root(x) ** 2 == x\n```\n"
        "Tests:\n```python\nassert solve(4)\nassert not solve(5)\n```"
    )
    assert extract_code(helper_then_solution, entry="solve") == (
        "import math\n\ndef root(x):\n    return math.isqrt(x)\n\n"
        "def solve(x):\n    return root(x) ** 2 == x"
    )


def test_a_later_draft_of_the_entry_is_not_pulled_in_by_a_helper_it_defines() -> None:
    text = (
        "```python\ndef h(x):\n    return x\n\ndef f(x):\n    return h(x)\n```\n"
        "Or:\n```python\ndef h(x):\n    return -x\n\ndef f(x):\n    return 0\n```"
    )
    assert extract_code(text, entry="f", which="first") == (
        "def h(x):\n    return x\n\ndef f(x):\n    return h(x)"
    )


CHAT_SHAPES = {
    "prose-code-prose": (
        "Sure! Here's a solution.\n\nimport math\n\nLIMIT = 10\n\n"
        "def helper(n):\n    return math.isqrt(n)\n\n"
        "def entry(n):\n    return helper(n) ** 2 == n and n < LIMIT\n\n"
        "This works because `isqrt` is exact.",
        "import math\n\nLIMIT = 10\n\ndef helper(n):\n    return math.isqrt(n)\n\n"
        "def entry(n):\n    return helper(n) ** 2 == n and n < LIMIT",
    ),
    "prose-between-code": (
        "A class first:\nclass Box:\n    def __init__(self, v):\n        self.v = v\n"
        "Now the function:\ndef entry(v):\n    return Box(v).v\nDone.",
        "class Box:\n    def __init__(self, v):\n        self.v = v\n\n"
        "def entry(v):\n    return Box(v).v",
    ),
    "list-item-indented": (
        "1. Define the helper:\n\n    def helper(x):\n        return x + 1\n\n"
        "2. Then:\n\n    def entry(x):\n        return helper(x)\n",
        "def helper(x):\n    return x + 1\n\ndef entry(x):\n    return helper(x)",
    ),
    "list-item-fenced": (
        "1. Helper:\n\n   ```python\n   def helper(x):\n       return x + 1\n   ```\n\n"
        "2. Main:\n\n   ```python\n   def entry(x):\n       return helper(x)\n   ```\n",
        "def helper(x):\n    return x + 1\n\ndef entry(x):\n    return helper(x)",
    ),
    "doctest-after-code": (
        "def entry(x):\n    return 2 * x\n\nExample:\n>>> entry(3)\n6\nOutput: 6\n",
        "def entry(x):\n    return 2 * x",
    ),
    "docstring-doctest-stays": (
        'def entry(x):\n    """Double.\n\n    >>> entry(3)\n    6\n    """\n    return 2 * x\n',
        'def entry(x):\n    """Double.\n\n    >>> entry(3)\n    6\n    """\n    return 2 * x',
    ),
    "repl-session-in-a-fence": (
        "```python\n>>> def entry(x):\n...     return 2 * x\n...\n>>> entry(3)\n6\n```",
        "def entry(x):\n    return 2 * x\n\nentry(3)",
    ),
    "bare-name-and-annotation-prose": (
        "Solution\ndef entry(x):\n    return x\nComplexity: O(1)\n",
        "def entry(x):\n    return x",
    ),
    "decorator-and-column-0-continuations": (
        "Memoized:\nfrom functools import lru_cache\n@lru_cache(None)\ndef entry(n):\n"
        "    return n if n < 2 else entry(n - 1) + entry(n - 2)\nTABLE = [\n1, 2,\n]\n"
        "if TABLE:\n    pass\nelse:\n    pass\nThat's all.",
        "from functools import lru_cache\n@lru_cache(None)\ndef entry(n):\n"
        "    return n if n < 2 else entry(n - 1) + entry(n - 2)\nTABLE = [\n1, 2,\n]\n"
        "if TABLE:\n    pass\nelse:\n    pass",
    ),
    "triple-quoted-at-column-0": (
        "Here:\nTEXT = '''\nline one\n'''\ndef entry():\n    return TEXT\n",
        "TEXT = '''\nline one\n'''\ndef entry():\n    return TEXT",
    ),
    "crlf": (
        "Here:\r\n```python\r\ndef entry():\r\n    return 1\r\n```\r\n",
        "def entry():\n    return 1",
    ),
    "other-language-blocks-between-unfenced-code": (
        "Input:\n```text\n3\n```\nimport sys\ndef entry():\n    return sys.maxsize\n",
        "import sys\ndef entry():\n    return sys.maxsize",
    ),
    "truncated-fence": (
        "Here:\n```python\nimport os\ndef entry(x):\n    return (x +",
        "import os\ndef entry(x):\n    return (x +",
    ),
    "body-then-helper": (
        "    return helper(x)\n\ndef helper(x):\n    return x\n",
        "    return helper(x)\n\ndef helper(x):\n    return x",
    ),
    "body-only": ("    y = x + 1\n    return y\n", "y = x + 1\nreturn y"),
}


@pytest.mark.parametrize(("completion", "expected"), CHAT_SHAPES.values(), ids=CHAT_SHAPES)
def test_chat_output_shapes(completion: str, expected: str) -> None:
    assert extract_code(completion, entry="entry") == expected


def test_broken_code_stays_so_its_error_is_graded() -> None:
    # A missing colon is code, not prose: dropping it would grade the body alone.
    assert extract_code("Here:\ndef entry(x)\n    return x\nDone.", entry="entry") == (
        "def entry(x)\n    return x"
    )
    assert extract_code("x = compute(\nNo more.", entry="x") == "x = compute("


def test_only_prose_gives_nothing() -> None:
    assert extract_code("I am not sure how to solve this.\nSorry!") == ""
    assert extract_code("```text\nnothing\n```") == ""


def test_stdin_programs_keep_every_part() -> None:
    text = "Read n:\nn = int(input())\nThen print it twice:\nprint(n * 2)\n"
    assert extract_code(text) == "n = int(input())\n\nprint(n * 2)"


def test_bad_which() -> None:
    with pytest.raises(ValueError, match="which"):
        extract_code("x", which="middle")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# The property: prose around a program P, fenced or not, extracts (and grades) as P.

_WORDS = [
    *("the", "a", "list", "of", "numbers", "we", "use", "helper", "function", "first"),
    *("then", "return", "sum", "each", "value", "it", "is", "this", "works", "because"),
    *("sorted", "loop", "over", "input", "output", "note", "simple", "approach", "step"),
    *("answer", "for", "in", "if", "else", "while", "with", "import", "def", "class"),
]
_SPECIAL = [
    "Here's the solution:",
    "Solution",
    "Output: 6",
    "Complexity: O(n log n)",
    ">>> entry(1)",
    "**Explanation**",
    "1. Define a helper.",
    "- Use `math.isqrt` (exact).",
    "# Approach",
    "Let me think... x = 1 is wrong.",
    "Example: entry(2) == 4",
]


@st.composite
def prose_lines(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(_SPECIAL)))
        else:
            words = draw(st.lists(st.sampled_from(_WORDS), min_size=2, max_size=9))
            end = draw(st.sampled_from([".", ":", "!", "?", ""]))
            lines.append(" ".join(words).capitalize() + end)
        if draw(st.booleans()):
            lines.append("")
    return "\n".join(lines)


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, int]:
    """A program defining helpers, a constant, maybe a class and ``entry``; and entry(1)."""
    parts, terms = [], []
    if draw(st.booleans()):
        parts.append("import math")
        terms.append("math.floor(0.5)")
    for k, c in enumerate(draw(st.lists(st.integers(-9, 9), min_size=1, max_size=3))):
        parts.append(f"def helper_{k}(x):\n    return x + ({c})")
        terms.append(f"helper_{k}(x)")
    constant = draw(st.integers(0, 99))
    parts.append(f"OFFSET = {constant}")
    terms.append("OFFSET")
    if draw(st.booleans()):
        parts.append("class Scale:\n    def __init__(self, k):\n        self.k = k")
        terms.append("Scale(x).k")
    parts.append("def entry(x):\n    return " + " + ".join(terms))
    program = "\n\n".join(parts)
    namespace: dict[str, Any] = {}
    exec(program, namespace)
    return program, namespace["entry"](1)


@st.composite
def wrapped(draw: st.DrawFn) -> tuple[str, str, int]:
    program, value = draw(programs())
    before = draw(prose_lines())
    fence = draw(st.sampled_from(["", "```python", "```py", "```", "~~~"]))
    closing = "~~~" if fence == "~~~" else "```"
    after = draw(st.one_of(st.just(""), prose_lines()))
    body = f"{fence}\n{program}\n{closing}" if fence else program
    return program, f"{before}\n{body}\n{after}", value


def _code_only(text: str) -> str:
    # A markdown heading ("# Approach") reads as a Python comment: kept, and harmless.
    return "\n".join(ln for ln in text.split("\n") if not ln.startswith("#")).strip("\n")


@given(case=wrapped())
def test_prose_around_a_program_extracts_as_the_program(case: tuple[str, str, int]) -> None:
    program, completion, _ = case
    assert _code_only(extract_code(completion, entry="entry")) == program
    assert extract_code(program, entry="entry") == program


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=wrapped())
def test_prose_around_a_program_grades_as_the_program(
    client: Any, case: tuple[str, str, int]
) -> None:
    program, completion, value = case
    spec = UnitTestReward(f"assert entry(1) == {value}", entry="entry")
    wrong = UnitTestReward(f"assert entry(1) == {value + 1}", entry="entry")
    results = grade_batch(
        client, TEMPLATE, [program, completion] * 2, [spec, spec, wrong, wrong], concurrency=4
    )
    assert [r.reward for r in results] == [1.0, 1.0, 0.0, 0.0], results
