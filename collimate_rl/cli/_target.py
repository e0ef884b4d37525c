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
import threading
from collections.abc import Callable, Iterator
from typing import Any

from collimate_rl.errors import CollimateUsageError

__all__ = ["EmbeddedNodeClient", "add_target_options", "open_client", "split_url"]


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
        "--token-file",
        metavar="FILE",
        help="the node's bearer token, read from FILE (a node started with --token-file; "
        "default $COLLIMATE_SERVE_TOKEN)",
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
    token = _token(getattr(args, "token_file", None))
    if url is not None or api_key is not None:
        socket_path, base_url = split_url(url) if url is not None else (None, None)
        if socket_path is not None and api_key is not None:
            raise CollimateUsageError("--api-key needs an https:// gateway --url, not a socket")
        client = connect(base_url, api_key=api_key, unix_socket=socket_path, token=token)
    elif resolve_transport().rule < 8:
        client = connect(token=token)
    else:
        with EmbeddedNodeClient(args.isolation, note) as embedded:
            yield embedded
        return
    with contextlib.closing(client):
        yield client


def _token(path: str | None) -> str | None:
    """The token in ``--token-file``, or ``None`` (the client then reads the environment)."""
    if path is None:
        return None
    from collimate_rl._bearer import read_token_file

    try:
        return read_token_file(path)
    except (OSError, ValueError) as exc:
        raise CollimateUsageError(f"--token-file: {exc}") from None


class EmbeddedNodeClient:
    """A client of a local node that starts on first use and stops on :meth:`close`.

    Starting a node takes a second or two, so a command that ends up sending
    nothing (an ``eval`` whose results are all in its output already) starts none.
    Attribute access is forwarded to the node's client; the first one, from any
    thread, starts the node.

    >>> with EmbeddedNodeClient("auto") as client:
    ...     client.started
    False
    """

    def __init__(self, isolation: str, note: Callable[[str], None] | None = None) -> None:
        self._isolation = isolation
        self._note = note
        self._lock = threading.Lock()
        self._stack = contextlib.ExitStack()
        self._client: Any = None

    @property
    def started(self) -> bool:
        """Whether the node was started."""
        return self._client is not None

    def _get(self) -> Any:
        with self._lock:
            if self._client is None:
                from collimate_rl.node import LocalNode

                if self._note is not None:
                    self._note(
                        f"starting a local node for this command (isolation {self._isolation}; "
                        "no --url given)"
                    )
                node = self._stack.enter_context(LocalNode(isolation=self._isolation))
                self._client = node.client()
            return self._client

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._get(), name)

    def close(self) -> None:
        """Stop the node if it was started (idempotent)."""
        with self._lock:
            self._stack.close()
            self._client = None

    def __enter__(self) -> EmbeddedNodeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
