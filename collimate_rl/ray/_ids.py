"""Fleet session ids: the node that holds a session is written into its id.

A fleet id is ``<node tag>.<the node's own session id>``, e.g.
``n3fa91c2e.ses_1fbf86ea71b68721c7ac63e8``. Any fleet client, in any process,
routes an id without asking anyone: no table to share between Ray workers, to
keep in sync with forks, or to lose with the driver. The tag names one *run*
of a node (a fresh random tag each time a node starts), so an id from a node
that died never reaches the node that replaced it.

>>> fid = fleet_id("n3fa91c2e", "ses_1fbf86ea71b68721c7ac63e8")
>>> fid
'n3fa91c2e.ses_1fbf86ea71b68721c7ac63e8'
>>> split_id(fid)
('n3fa91c2e', 'ses_1fbf86ea71b68721c7ac63e8')
>>> split_id("ses_1fbf86ea71b68721c7ac63e8")
Traceback (most recent call last):
...
collimate_rl.errors.CollimateUsageError: session id 'ses_1fbf86ea71b68721c7ac63e8' was not made by a fleet client (expected '<node tag>.<session id>', e.g. 'n3fa91c2e.ses_...'): use the client of the fleet that created it
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Container
from typing import Final

from collimate_rl.errors import CollimateUsageError

__all__ = ["fleet_id", "is_tag", "new_tag", "split_id"]

_TAG: Final = re.compile(r"n[0-9a-f]{8}")
_SEP: Final = "."


def new_tag(taken: Container[str] = ()) -> str:
    """A fresh node tag (``n`` + 8 hex digits) not in ``taken``.

    >>> is_tag(new_tag()), new_tag(taken={"n00000000"}) != "n00000000"
    (True, True)
    """
    while True:
        tag = "n" + secrets.token_hex(4)
        if tag not in taken:
            return tag


def is_tag(text: str) -> bool:
    """``text`` has the form of a node tag.

    >>> is_tag("n0a1b2c3d"), is_tag("n0A1B2C3D"), is_tag("ses_1")
    (True, False, False)
    """
    return isinstance(text, str) and _TAG.fullmatch(text) is not None


def fleet_id(tag: str, node_session_id: str) -> str:
    """The fleet id of session ``node_session_id`` on node ``tag``."""
    if not is_tag(tag):
        raise CollimateUsageError(f"not a node tag: {tag!r}")
    if not isinstance(node_session_id, str) or not node_session_id:
        raise CollimateUsageError(f"the node returned no session id ({node_session_id!r})")
    return f"{tag}{_SEP}{node_session_id}"


def split_id(session_id: object) -> tuple[str, str]:
    """``(node tag, the node's session id)`` of a fleet id; a clear error for anything else."""
    if not isinstance(session_id, str) or not session_id:
        raise CollimateUsageError(f"session_id must be a non-empty string, got {session_id!r}")
    tag, sep, rest = session_id.partition(_SEP)
    if not sep or not rest or not is_tag(tag):
        raise CollimateUsageError(
            f"session id {session_id!r} was not made by a fleet client (expected "
            "'<node tag>.<session id>', e.g. 'n3fa91c2e.ses_...'): use the client of the "
            "fleet that created it"
        )
    return tag, rest
