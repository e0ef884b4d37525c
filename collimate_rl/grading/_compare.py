"""Part 5a of the shipped harness: how T compares a candidate's answers with the expected.

Stdlib only; runs only in the trusted process T, on values the codec rebuilt (see
:mod:`._codec`), never on the candidate's own objects.

>>> same(1, 1.0), same(True, 1), same((1, 2), [1, 2], loose=True)
(True, False, True)
>>> _io_same("3 \\n", "3", strip=True, tol=None)
True
"""

from __future__ import annotations  # collimate: strip

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def same(got: Any, want: Any, *, tol: float | None = None, loose: bool = False) -> bool:
    """Strict structural equality of plain data (``got`` comes from the codec).

    ``bool`` never equals ``int``; ints and floats compare by value (with
    ``tol`` as relative and absolute tolerance); two NaNs are equal; with
    ``loose`` a tuple equals a list of the same items.
    """
    tg, tw = type(got), type(want)
    if tg is bool or tw is bool:
        return tg is tw and bool(got == want)
    if tg in (int, float) and tw in (int, float):
        if tg is float and tw is float and math.isnan(got) and math.isnan(want):
            return True
        if tol is not None and (tg is float or tw is float):
            return math.isclose(got, want, rel_tol=tol, abs_tol=tol)
        return bool(got == want)
    if tw is complex and tg is complex:
        if tol is not None:
            return bool(abs(got - want) <= max(tol, tol * abs(want)))
        return bool(got == want)
    if tg in (list, tuple) and tw in (list, tuple):
        if tg is not tw and not loose:
            return False
        return len(got) == len(want) and all(
            same(a, b, tol=tol, loose=loose) for a, b in zip(got, want, strict=False)
        )
    if tg is dict and tw is dict:
        if len(got) != len(want) or set(got) != set(want):
            return False
        return all(same(got[key], want[key], tol=tol, loose=loose) for key in want)
    if tg in (set, frozenset) and tw in (set, frozenset):
        return bool(got == want)
    if tw in (str, bytes, type(None), int, float, complex, list, tuple, dict, set, frozenset):
        return tg is tw and bool(got == want)
    return bool(want == got)  # a trusted reference's own type decides


def _as_lists(value: Any) -> Any:
    if type(value) in (list, tuple):
        return [_as_lists(item) for item in value]
    if type(value) is dict:
        return {key: _as_lists(item) for key, item in value.items()}
    return value


def _io_same(got: str, want: str, *, strip: bool, tol: float | None) -> bool:
    if strip:
        got_lines = [line.strip() for line in got.strip().splitlines()]
        want_lines = [line.strip() for line in want.strip().splitlines()]
    else:
        if tol is None:
            return got == want
        got_lines, want_lines = got.split("\n"), want.split("\n")
    if len(got_lines) != len(want_lines):
        return False
    for got_line, want_line in zip(got_lines, want_lines, strict=False):
        if got_line == want_line:
            continue
        if tol is None:
            return False
        got_tokens, want_tokens = got_line.split(), want_line.split()
        if len(got_tokens) != len(want_tokens):
            return False
        for a, b in zip(got_tokens, want_tokens, strict=False):
            if a == b:
                continue
            try:
                if not math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol):
                    return False
            except ValueError:
                return False
    return True
