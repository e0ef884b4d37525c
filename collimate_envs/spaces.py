"""Text spaces wide enough for real prompts and completions.

Gymnasium's default :class:`~gymnasium.spaces.Text` charset is only
``[a-zA-Z0-9]``; code needs whitespace, punctuation and Unicode. These spaces
admit every printable Unicode character plus ``\\n``, ``\\t`` and ``\\r``.

>>> space = completion_space()
>>> "def f(x):\\n    return x ** 2  # ✓" in space
True
>>> "\\x00" in space
False
"""

from __future__ import annotations

import copy
import sys
from functools import lru_cache
from typing import Any

from gymnasium.spaces import Text

__all__ = [
    "MAX_COMPLETION_CHARS",
    "MAX_PROMPT_CHARS",
    "PrintableText",
    "completion_space",
    "printable",
    "printable_charset",
    "prompt_space",
]

#: Long enough for a long chain of thought plus code (~32k tokens).
MAX_COMPLETION_CHARS = 1 << 17
#: Long enough for a problem statement with examples, or a page of feedback.
MAX_PROMPT_CHARS = 1 << 16


@lru_cache(maxsize=1)
def printable_charset() -> frozenset[str]:
    """Every printable code point, plus the whitespace code contains."""
    chars = {chr(i) for i in range(sys.maxunicode + 1) if chr(i).isprintable()}
    return frozenset(chars | {"\n", "\t", "\r"})


class PrintableText(Text):
    """A :class:`~gymnasium.spaces.Text` over :func:`printable_charset` whose copies share it.

    The charset has ~145k characters, and gymnasium's vector utilities deep-copy a
    Text space once per sub-env: copying its lookup tables made ``make_vec`` cost
    hundreds of milliseconds per member. The tables are never mutated, so copies
    share them; everything else (the RNG) is copied as usual.

    >>> import copy
    >>> space = completion_space()
    >>> twin = copy.deepcopy(space)
    >>> twin == space and twin.character_set is space.character_set
    True
    """

    _SHARED = frozenset({"_char_set", "_char_list", "_char_index", "_char_str"})

    def __deepcopy__(self, memo: dict[int, Any]) -> PrintableText:
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        for name, value in self.__dict__.items():
            clone.__dict__[name] = value if name in self._SHARED else copy.deepcopy(value, memo)
        return clone


@lru_cache(maxsize=8)
def _prototype(max_length: int) -> PrintableText:
    return PrintableText(max_length, min_length=0, charset=printable_charset())


def completion_space(max_length: int = MAX_COMPLETION_CHARS) -> Text:
    """The action space of the code envs: any printable text, possibly empty."""
    return copy.deepcopy(_prototype(max_length))


def prompt_space(max_length: int = MAX_PROMPT_CHARS) -> Text:
    """The observation space of the code envs: a prompt or a feedback message."""
    return copy.deepcopy(_prototype(max_length))


def printable(text: str, max_length: int = MAX_PROMPT_CHARS) -> str:
    """``text`` made a member of :func:`prompt_space`: other characters become U+FFFD.

    >>> printable("ok\\x00") == "ok\\ufffd"
    True
    """
    charset = printable_charset()
    return "".join(c if c in charset else "\ufffd" for c in text[-max_length:])
