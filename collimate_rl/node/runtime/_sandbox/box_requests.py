"""What a worker may ask the master for on a box connection (``boxes.py``), checked.

A request is one ``SOCK_SEQPACKET`` datagram of JSON: ``{"op": "spawn", ...}`` with a
candidate's 5 fds attached, or ``{"op": "exec", "spawn": bool}`` with none (the master
makes an exec box's pipes; ``spawn``: the job runs a program of its own, no Python in the
box's interpreter, so a box kept from an earlier exec may take it). Anything else is a
``BadRequest``, answered and never acted on.

A spawn's seed and environment are checked as the factory checks its own spawn
requests (``factory.py``, the same protocol): ``valid_seed`` and ``valid_env``.
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

MAX_REQUEST = 1 << 16
#: Fds a request carries, per op.
REQUEST_FDS = {"spawn": 5, "exec": 0, "warm-image": 0}
MAX_REQUEST_FDS = max(REQUEST_FDS.values())
_SEED_HEX = frozenset("0123456789abcdefABCDEF")


def valid_seed(seed: object) -> TypeGuard[str]:
    """A spawn's seed: 64 hex digits.

    >>> valid_seed("0f" * 32), valid_seed("0g" * 32)
    (True, False)
    """
    return type(seed) is str and len(seed) == 64 and set(seed) <= _SEED_HEX


def valid_env(env: object) -> TypeGuard[dict[str, str]]:
    """A spawn's environment: names (no ``=``, no NUL) to strings (no NUL).

    >>> valid_env({"A": "1"}), valid_env({"A=B": "1"}), valid_env(["A"])
    (True, False, False)
    """
    return type(env) is dict and all(
        type(k) is str and type(v) is str and k and "=" not in k and "\0" not in k + v
        for k, v in env.items()
    )


class BadRequest(ValueError):
    """A request the master will not act on (its reply says why)."""


def parse_request(msg: bytes, fds: list[int]) -> dict[str, Any]:
    """A box connection's request, checked (``BadRequest`` else).

    >>> parse_request(b'{"op": "exec"}', [])
    {'op': 'exec'}
    >>> parse_request(b'{"op": "exec"}', [7])
    Traceback (most recent call last):
    ...
    collimate_rl.node.runtime._sandbox.box_requests.BadRequest: pass 0 fds
    """
    try:
        req = json.loads(msg.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(str(exc)) from None
    if not isinstance(req, dict) or req.get("op") not in REQUEST_FDS:
        raise BadRequest("op must be spawn, exec or warm-image")
    if len(fds) != REQUEST_FDS[req["op"]]:
        raise BadRequest(f"pass {REQUEST_FDS[req['op']]} fds")
    if req["op"] == "exec" and type(req.get("spawn", False)) is not bool:
        raise BadRequest("spawn must be true or false")
    if req["op"] == "spawn":
        if not valid_seed(req.get("seed")):
            raise BadRequest("seed must be 64 hex digits")
        if not valid_env(req.get("env")):
            raise BadRequest("env must map names to strings")
        if req.get("code") != "marshal":
            raise BadRequest("boxes run marshal programs only")
    return req
