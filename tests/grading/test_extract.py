"""Code extraction from chat-style completions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collimate_rl.grading import extract_code

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
)
prose = st.text(alphabet="abc xyz.,!?\n", max_size=40)


@given(
    before=prose, after=prose, lines=code_lines, tag=st.sampled_from(["python", "py", "Python3"])
)
def test_the_fenced_block_is_extracted(before: str, after: str, lines: list[str], tag: str) -> None:
    body = "\n".join(lines)
    completion = f"{before}\n```{tag}\n{body}\n```\n{after}"
    assert extract_code(completion) == body.strip()


@given(first=code_lines, last=code_lines)
def test_last_block_wins_by_default(first: list[str], last: list[str]) -> None:
    a, b = "\n".join(first), "\n".join(last)
    completion = f"```python\n{a}\n```\nrevised:\n```python\n{b}\n```"
    assert extract_code(completion) == b.strip()
    assert extract_code(completion, which="first") == a.strip()


def test_python_blocks_beat_other_languages_and_untagged() -> None:
    text = "```\nuntagged\n```\n```python\nx = 1\n```\n```bash\nrm -rf /\n```"
    assert extract_code(text) == "x = 1"
    assert extract_code("```bash\nls\n```\n```\ny = 2\n```") == "y = 2"
    assert extract_code("```bash\nls\n```", language="bash") == "ls"
    assert extract_code("```rust\nfn main(){}\n```", language=None) == "fn main(){}"


def test_entry_prefers_the_block_that_defines_it() -> None:
    text = "```python\ndef solve():\n    return 1\n```\nusage:\n```python\nprint(solve())\n```"
    assert extract_code(text, entry="solve") == "def solve():\n    return 1"
    assert extract_code(text) == "print(solve())"


def test_fallbacks() -> None:
    assert extract_code("```python\ndef f():\n    return 2") == "def f():\n    return 2"
    assert (
        extract_code("Sure.\ndef solve(x):\n    return x", entry="solve")
        == "def solve(x):\n    return x"
    )
    assert extract_code("  x = 3  ") == "x = 3"
    assert extract_code("~~~python\nz = 4\n~~~") == "z = 4"


def test_bad_which() -> None:
    with pytest.raises(ValueError, match="which"):
        extract_code("x", which="middle")  # type: ignore[arg-type]
