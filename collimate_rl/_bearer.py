"""The optional bearer token of a node: its syntax, its header and where clients find it.

A node started with ``collimate serve --token-file F`` answers only requests
carrying ``Authorization: Bearer <token>``; the daemon clients send it when
given ``token=`` or when ``$COLLIMATE_SERVE_TOKEN`` is set. Shared by the node
(:mod:`collimate_rl.node.auth`) and the clients (:mod:`collimate_rl.wire`),
so both sides agree on one syntax.

>>> check_token("s3cr3t-Token_1")
's3cr3t-Token_1'
>>> bearer_headers("s3cr3t", environ={})
{'Authorization': 'Bearer s3cr3t'}
>>> bearer_headers(None, environ={ENV_SERVE_TOKEN: "from-env"})
{'Authorization': 'Bearer from-env'}
>>> bearer_headers(None, environ={})
{}
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = ["ENV_SERVE_TOKEN", "bearer_headers", "check_token", "new_token", "read_token_file"]

#: The environment variable the daemon clients read their node token from.
ENV_SERVE_TOKEN: Final = "COLLIMATE_SERVE_TOKEN"

#: Printable ASCII without spaces: safe in a header, unambiguous in a file.
_TOKEN_RE: Final = re.compile(r"[\x21-\x7e]{1,4096}")


def check_token(token: str, what: str = "token") -> str:
    """Return ``token`` if it can be sent as a bearer token, else raise ``ValueError``.

    >>> check_token("has space")
    Traceback (most recent call last):
    ...
    ValueError: token must be 1 to 4096 printable ASCII characters without spaces
    """
    if not isinstance(token, str) or not _TOKEN_RE.fullmatch(token):
        raise ValueError(f"{what} must be 1 to 4096 printable ASCII characters without spaces")
    return token


def bearer_headers(
    token: str | None, *, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The ``Authorization`` header for ``token``, else ``$COLLIMATE_SERVE_TOKEN``, else none."""
    env = os.environ if environ is None else environ
    if token is None:
        token = env.get(ENV_SERVE_TOKEN) or None
        what = f"${ENV_SERVE_TOKEN}"
    else:
        what = "token"
    if token is None:
        return {}
    return {"Authorization": f"Bearer {check_token(token, what)}"}


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe).

    >>> len(new_token()) >= 43
    True
    """
    return secrets.token_urlsafe(32)


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token in ``path`` (surrounding whitespace ignored).

    Raises:
        ValueError: the file is readable by every user of the host, is empty,
            or holds something that is not a token.
        OSError: it cannot be read.
    """
    path = Path(path)
    with open(path, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        data = f.read(8192)
    if mode & stat.S_IROTH:
        raise ValueError(
            f"token file {path} is readable by every user of this host; chmod o-r (e.g. 600) it"
        )
    try:
        return check_token(data.decode("ascii").strip(), f"the token in {path}")
    except UnicodeDecodeError:
        raise ValueError(f"the token in {path} is not ASCII") from None
