"""The restricted value codec spoken between the harness and the candidate.

Only plain builtin data crosses the process boundary: ``None``, ``bool``,
``int``, ``float`` (non-finite too), ``str``, ``bytes``, ``complex``,
``list``, ``tuple``, ``set``, ``frozenset`` and ``dict`` (any hashable key
the codec can carry). Anything else raises :class:`Unserializable` on the
candidate's side, and :func:`decode` rebuilds *fresh builtin objects* on the
trusted side, so an object whose ``__eq__`` always answers ``True`` can never
reach a comparison.

Every JSON object in an encoding is a tag with exactly one key: ``"f"`` a
non-finite float, ``"t"`` a tuple, ``"s"`` a set, ``"z"`` a frozenset, ``"b"``
bytes (base64), ``"c"`` a complex, ``"d"`` a dict as a list of pairs, ``"i"``
an int beyond 4000 bits (hex, so no int/str digit limit applies). Lists,
strings, ints, finite floats, booleans and null are themselves.

This module is stdlib-only: its source text is shipped into the sandbox with
the harness.

>>> value = {"a": (1, 2.5), 3: {b"x", None}, "n": float("inf")}
>>> loads(dumps(value)) == value
True
>>> dumps([1, (2,)])
'[1,{"t":[2]}]'
>>> dumps(object())
Traceback (most recent call last):
...
collimate_rl.grading._codec.Unserializable: cannot send a value of type object
"""

from __future__ import annotations  # collimate: strip

import binascii
import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_DEPTH", "CodecError", "Unserializable", "decode", "dumps", "encode", "loads"]

#: Deeper values are refused both ways (keeps the trusted decoder's stack safe).
MAX_DEPTH = 200


class CodecError(ValueError):
    """A malformed encoding: the trusted side treats it as a wrong answer."""


class Unserializable(TypeError):
    """The value holds something other than plain builtin data."""


def encode(value: Any, _depth: int = 0) -> Any:
    """Turn a plain value into JSON-ready data (see the module docstring).

    Exact types are checked (``type(x) is int``), so subclasses of builtins
    (an ``int`` whose ``__eq__`` lies) are refused.
    """
    if _depth > MAX_DEPTH:
        raise Unserializable("value nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        # Past ~1200 digits, decimal text hits int/str conversion limits: use hex.
        return value if value.bit_length() <= _BIG_INT_BITS else {"i": format(value, "x")}
    if kind is float:
        return value if math.isfinite(value) else {"f": repr(value)}
    if kind is list:
        return [encode(item, _depth + 1) for item in value]
    if kind is tuple:
        return {"t": [encode(item, _depth + 1) for item in value]}
    if kind is set:
        return {"s": [encode(item, _depth + 1) for item in value]}
    if kind is frozenset:
        return {"z": [encode(item, _depth + 1) for item in value]}
    if kind is bytes:
        return {"b": binascii.b2a_base64(value, newline=False).decode("ascii")}
    if kind is complex:
        return {"c": [encode(value.real, _depth + 1), encode(value.imag, _depth + 1)]}
    if kind is dict:
        return {"d": [[encode(k, _depth + 1), encode(v, _depth + 1)] for k, v in value.items()]}
    raise Unserializable(f"cannot send a value of type {kind.__name__}")


_BIG_INT_BITS = 4000
_HEX = frozenset("0123456789abcdef")
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def decode(data: Any, _depth: int = 0) -> Any:
    """Rebuild fresh builtin objects from :func:`encode`'s output.

    Raises:
        CodecError: anything that :func:`encode` could not have produced.
    """
    if _depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    kind = type(data)
    if data is None or kind is bool or kind is str or kind is int or kind is float:
        return data
    if kind is list:
        return [decode(item, _depth + 1) for item in data]
    if kind is not dict or len(data) != 1:
        raise CodecError(f"unexpected {kind.__name__} in encoding")
    ((tag, body),) = data.items()
    try:
        if tag == "f":
            return _NONFINITE[body]
        if tag == "i":
            digits = body[1:] if type(body) is str and body[:1] == "-" else body
            if type(digits) is not str or not digits or not _HEX.issuperset(digits):
                raise CodecError("a big int must be hex text")
            return int(body, 16)
        if tag == "b":
            if type(body) is not str:
                raise CodecError("bytes must be base64 text")
            raw = binascii.a2b_base64(body.encode("ascii"))
            if binascii.b2a_base64(raw, newline=False).decode("ascii") != body:
                raise CodecError("bytes must be canonical base64")
            return raw
        if type(body) is not list:
            raise CodecError(f"tag {tag!r} needs a list")
        if tag == "t":
            return tuple(decode(item, _depth + 1) for item in body)
        if tag == "s":
            return {decode(item, _depth + 1) for item in body}
        if tag == "z":
            return frozenset(decode(item, _depth + 1) for item in body)
        if tag == "c":
            real, imag = (decode(item, _depth + 1) for item in body)
            if type(real) is not float or type(imag) is not float:
                raise CodecError("complex parts must be floats")
            return complex(real, imag)
        if tag == "d":
            out: dict[Any, Any] = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise CodecError("dict items must be pairs")
                out[decode(pair[0], _depth + 1)] = decode(pair[1], _depth + 1)
            return out
    except CodecError:
        raise
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:  # unhashable, base64, arity
        raise CodecError(f"bad {tag!r} value: {exc}") from None
    raise CodecError(f"unknown tag {tag!r}")


def dumps(value: Any) -> str:
    """Encode ``value`` to compact JSON text."""
    import json  # not at the top: the zygote imports this module and must start fast

    return json.dumps(encode(value), separators=(",", ":"), allow_nan=False)


def loads(text: str | bytes) -> Any:
    """Decode JSON text produced by :func:`dumps`.

    Raises:
        CodecError: malformed text (including nesting beyond the stack).
    """
    import json

    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"not JSON: {exc}") from None
    return decode(data)
