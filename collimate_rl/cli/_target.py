"""Which node a client command talks to: ``--url``/``--api-key``, the environment, or a
local node started for the command.

Order (first match wins), following :func:`collimate_rl.connect`:

1. ``--url unix:/path`` (or a plain socket path) -> the daemon on that unix socket;
2. ``--api-key`` -> the gateway (``--url`` is then its origin);
3. ``--url http(s)://host:port`` -> the daemon over TCP;
4. ``$COLLIMATE_SERVE_SOCKET``, ``$COLLIMATE_API_KEY``, ``$COLLIMATE_SERVE_URL``, or the
   in-pod session socket when it exists -> as :func:`collimate_rl.connect` resolves them;
5. nothing configured -> an embedded local node (``--isolation``), started for the
   command and stopped after it (templates it bakes and sessions it holds go with it).

>>> split_url("unix:/run/node.sock"), split_url("http://127.0.0.1:8080")
(('/run/node.sock', None), (None, 'http://127.0.0.1:8080'))
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from collimate_rl.errors import CollimateUsageError

__all__ = ["add_target_options", "open_client", "split_url"]


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """The flags choosing the node (shared by every client command)."""
    group = parser.add_argument_group("target (default: $COLLIMATE_* env, else a local node)")
    group.add_argument(
        "--url",
        metavar="URL",
        help="the node: http://host:port, unix:/path/to/socket, or the gateway origin "
        "with --api-key",
    )
    group.add_argument(
        "--api-key",
        metavar="KEY",
        help="a col_* gateway key (default $COLLIMATE_API_KEY when no --url is given)",
    )
    group.add_argument(
        "--isolation",
        choices=("auto", "bwrap", "none"),
        default="auto",
        help="isolation of the embedded local node, when one is started (default auto)",
    )


def split_url(url: str) -> tuple[str | None, str | None]:
    """``(unix_socket, base_url)`` for a ``--url`` value.

    Raises:
        CollimateUsageError: neither an http(s) URL nor a unix socket path.
    """
    if url.startswith("unix:"):
        path = url.removeprefix("unix:")
        path = "/" + path.lstrip("/") if path.startswith("//") else path
        if not path:
            raise CollimateUsageError("--url unix: needs a socket path, e.g. unix:/run/node.sock")
        return path, None
    if url.startswith(("http://", "https://")):
        return None, url
    if url.startswith(("/", "./", "../")):
        return url, None
    raise CollimateUsageError(
        f"--url {url!r} is not http://host:port, https://..., or unix:/path/to/socket"
    )


@contextlib.contextmanager
def open_client(args: argparse.Namespace, note: Any = None) -> Iterator[Any]:
    """The client for a command, closed (and its embedded node stopped) on exit.

    Args:
        args: parsed flags with ``url``, ``api_key`` and ``isolation``.
        note: called with a status line when an embedded node is started.
    """
    from collimate_rl.wire import connect, resolve_transport

    url: str | None = args.url
    api_key: str | None = args.api_key
    if url is not None or api_key is not None:
        socket_path, base_url = split_url(url) if url is not None else (None, None)
        if socket_path is not None and api_key is not None:
            raise CollimateUsageError("--api-key needs an https:// gateway --url, not a socket")
        client = connect(base_url, api_key=api_key, unix_socket=socket_path)
    elif resolve_transport().rule < 8:
        client = connect()
    else:
        yield from _embedded(args.isolation, note)
        return
    with contextlib.closing(client):
        yield client


def _embedded(isolation: str, note: Any) -> Iterator[Any]:
    from collimate_rl.node import LocalNode

    if note is not None:
        note(f"starting a local node for this command (isolation {isolation}; no --url given)")
    with LocalNode(isolation=isolation) as node:
        yield node.client()
