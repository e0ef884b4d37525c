"""Pull the program out of a chat-style completion.

>>> extract_code("Here:\\n```python\\ndef solve(x):\\n    return x\\n```\\nDone.")
'def solve(x):\\n    return x'
"""

from __future__ import annotations

import re
from typing import Literal

from collimate_rl.grading.languages import FENCE_TAGS

__all__ = ["extract_code"]

_FENCE = re.compile(
    r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S
)
_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n]*\n", re.M)
_ALIASES = {"python": ("python", "py", "python3", "py3", "python2")}
_ALIASES.update(FENCE_TAGS)  # type: ignore[arg-type]  # c, cpp, java, javascript, rust, bash, go


def _tag_matches(tag: str, language: str | None) -> bool:
    if language is None:
        return True
    wanted = _ALIASES.get(language.lower(), (language.lower(),))
    return tag.lower() in wanted


def extract_code(
    completion: str,
    *,
    entry: str | None = None,
    language: str | None = "python",
    which: Literal["last", "first"] = "last",
) -> str:
    """Return the code in ``completion``.

    Rules, first match wins:

    1. Fenced blocks (```` ``` ```` or ``~~~``) tagged ``language`` (aliases
       such as ``py`` count); failing those, untagged blocks. With ``entry``,
       blocks defining ``entry`` are preferred. ``which`` picks the last
       (default) or the first. ``language=None`` accepts any tag.
    2. An unterminated fence (a truncated generation): everything after it.
    3. With ``entry``: the text from ``def entry`` / ``class entry`` on.
    4. The whole completion.

    The result is stripped of surrounding blank space.

    Args:
        completion: the model's text.
        entry: the function the grader calls, to prefer the block defining it.
        language: the fence tag to look for, or ``None`` for any.
        which: ``"last"`` or ``"first"`` among the eligible blocks.

    >>> text = "```python\\nx = 1\\n```\\nthen\\n```python\\nx = 2\\n```"
    >>> extract_code(text), extract_code(text, which="first")
    ('x = 2', 'x = 1')
    >>> extract_code("```\\nprint(1)\\n```")
    'print(1)'
    >>> extract_code("```bash\\nls\\n```\\n```python\\nprint(2)\\n```")
    'print(2)'
    >>> extract_code("```python\\ndef solve():\\n    return 1")
    'def solve():\\n    return 1'
    >>> extract_code("I think.\\ndef solve(x):\\n    return x", entry="solve")
    'def solve(x):\\n    return x'
    """
    if which not in ("last", "first"):
        raise ValueError(f"which must be 'last' or 'first', not {which!r}")
    blocks = [(m.group(2), m.group(3)) for m in _FENCE.finditer(completion)]
    tagged = [body for tag, body in blocks if tag and _tag_matches(tag, language)]
    untagged = [body for tag, body in blocks if not tag]
    for pool in (tagged, untagged):
        if not pool:
            continue
        if entry is not None:
            defining = [body for body in pool if _defines(body, entry)]
            pool = defining or pool
        return (pool[-1] if which == "last" else pool[0]).strip()
    if not blocks:
        opens = list(_OPEN.finditer(completion))
        if opens and (not opens[-1].group(2) or _tag_matches(opens[-1].group(2), language)):
            return completion[opens[-1].end() :].strip()
    if entry is not None:
        found = re.search(
            rf"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+{re.escape(entry)}\b", completion, re.M
        )
        if found:
            return completion[found.start() :].strip()
    return completion.strip()


def _defines(body: str, entry: str) -> bool:
    return (
        re.search(rf"\b(?:def|class)\s+{re.escape(entry)}\b|^{re.escape(entry)}\s*=", body, re.M)
        is not None
    )
