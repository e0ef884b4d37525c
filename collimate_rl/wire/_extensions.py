"""Which clients may use our local node's batch routes, learnt once per client.

``exec_batch`` / ``delete_sessions`` exist on our node only. A real daemon or a
gateway answers the route with 404 ``not_found``; the caller remembers that per
client (weakly) and uses the contract's per-session routes from then on.

>>> class Daemon:
...     def exec_batch(self, items): ...
>>> d = Daemon()
>>> has_batch_route(d), forget_batch_route(d), has_batch_route(d)
(True, None, False)
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from collimate_rl.errors import CollimateNotFoundError

__all__ = ["forget_batch_route", "has_batch_route", "is_missing_route"]

_WITHOUT: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def has_batch_route(client: Any) -> bool:
    """Whether ``client`` has ``exec_batch`` and its node has not refused the route."""
    if not callable(getattr(client, "exec_batch", None)):
        return False
    try:
        return client not in _WITHOUT
    except TypeError:  # not weakly referenceable: ask every time
        return True


def forget_batch_route(client: Any) -> None:
    """Remember that ``client``'s node has no batch route."""
    with contextlib.suppress(TypeError):
        _WITHOUT[client] = True


def is_missing_route(exc: BaseException) -> bool:
    """Whether ``exc`` is a node saying it has no such route (404 ``not_found``)."""
    return isinstance(exc, CollimateNotFoundError) and exc.error_code == "not_found"
