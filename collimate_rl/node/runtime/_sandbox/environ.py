"""The process environment: what a template's execs share, and changes made only where needed.

``os.environ`` decodes every variable it reads in Python: ``dict(os.environ)`` and
a ``get`` per variable cost a grade's worker ~80 calls into ``os``'s mapping per
grade, and in a freshly forked process (a box) each object they make copies a page.
Here the environment is read as the bytes mapping behind ``os.environ``, copied and
compared in C, and only the variables that change go through ``os.environ`` (and so
``putenv``). A box does not read it at all: the master sends it the changes from
the zygote's environment, which is :func:`template_env`.

>>> old = environ_data()
>>> replace_environ({"A_B": "1", "C": "2"}); dict(os.environ)
{'A_B': '1', 'C': '2'}
>>> environ_changes({"A_B": "1", "C": "2"}, {"A_B": "1", "D": "3"})
{'D': '3', 'C': None}
>>> amend_environ({"D": "3", "C": None}); dict(os.environ)
{'A_B': '1', 'D': '3'}
>>> restore_environ(old); environ_data() == old
True
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "EnvironAtRest",
    "amend_environ",
    "environ_changes",
    "environ_data",
    "replace_environ",
    "restore_environ",
    "template_env",
]

_ENCODING = sys.getfilesystemencoding()


def template_env(cfg: dict[str, Any], base_env: dict[str, str] | None = None) -> dict[str, str]:
    """What the environment of every exec of a template starts from (before its own env).

    ``base_env`` (the node's, ``cfg["base_env"]``, unless a session server's own, with its
    home and proxy), then the template's ``env``: the zygote's and, between grades, a
    worker's environment; an exec's adds its own variables and seed.
    """
    env = dict(base_env if base_env is not None else cfg.get("base_env") or {})
    env.update({k: v for k, v in cfg.get("env") or []})
    return env


def environ_data() -> dict[bytes, bytes]:
    """A copy of the environment, encoded as ``os.environ`` keeps it.

    A C-level copy of the mapping behind ``os.environ`` (CPython's ``_data``), or,
    on a Python without one, the variables encoded here.
    """
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return data.copy()
    return {_encode(k): _encode(v) for k, v in os.environ.items()}


def replace_environ(env: dict[str, str]) -> None:
    """Make ``os.environ`` (and the C environment) exactly ``env``, touching only what differs."""
    restore_environ({_encode(k): _encode(v) for k, v in env.items()})


def restore_environ(data: dict[bytes, bytes]) -> None:
    """Make the environment exactly ``data`` (an :func:`environ_data` copy)."""
    current = environ_data()
    if current != data:
        changes = environ_changes(current, data)
        amend_environ({_decode(k): None if v is None else _decode(v) for k, v in changes.items()})


def environ_changes(current: Mapping[Any, Any], env: Mapping[Any, Any]) -> dict[Any, Any]:
    """What turns ``current`` into ``env``: the values that differ, and ``None`` for removals."""
    changes = {k: v for k, v in env.items() if current.get(k) != v}
    changes.update({k: None for k in current.keys() - env.keys()})
    return changes


def amend_environ(changes: Mapping[str, str | None]) -> None:
    """Set each variable of ``changes`` in ``os.environ`` (and the C environment); ``None``
    removes it. Nothing else is read or written."""
    for key, value in changes.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


class EnvironAtRest:
    """The environment a process keeps between jobs, and each job's changes to it.

    >>> old = environ_data()
    >>> rest = EnvironAtRest({"A": "1"})
    >>> with rest.changed_to({"A": "1", "SEED": "2"}):
    ...     dict(os.environ)
    {'A': '1', 'SEED': '2'}
    >>> dict(os.environ)
    {'A': '1'}
    >>> restore_environ(old)
    """

    def __init__(self, env: dict[str, str]) -> None:
        replace_environ(env)
        self.env = dict(env)
        self.data = environ_data()

    @contextlib.contextmanager
    def changed_to(self, env: dict[str, str]) -> Iterator[None]:
        """Run the body with the environment exactly ``env``; at rest again after it."""
        if environ_data() == self.data:  # at rest: change what differs
            amend_environ(environ_changes(self.env, env))
        else:
            replace_environ(env)
        try:
            yield
        finally:
            restore_environ(self.data)


def _encode(text: str) -> bytes:
    return text.encode(_ENCODING, "surrogateescape")


def _decode(data: bytes) -> str:
    return data.decode(_ENCODING, "surrogateescape")
