"""A node for the benchmark scripts: ``collimate serve`` on a unix socket, started and awaited.

The node runs from the socket's temporary directory, never from a checkout's root: with
``-m`` the current directory's package would win over ``PYTHONPATH``, which is how the
scripts compare another build (``PYTHONPATH=<checkout>``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any


def start(
    prefix: str,
    preexec_fn: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[Any, str]:
    """Start a node (in ``env``, default this one's); ``(its process, its socket path)``
    (the socket may not exist yet)."""
    folder = tempfile.mkdtemp(prefix=prefix)
    sock = os.path.join(folder, "node.sock")
    node = subprocess.Popen(
        [sys.executable, "-m", "collimate_rl.node", "serve", "--socket", sock],
        cwd=folder,
        stderr=subprocess.DEVNULL,
        preexec_fn=preexec_fn,
        env=env,
    )
    return node, sock


def stop(node: Any, sock: str, timeout: float = 60.0) -> None:
    """Stop a node :func:`start` started (SIGTERM: a drain; SIGKILL past ``timeout``).

    Then remove its folder: the node removes its socket, the folder is ours.
    """
    node.send_signal(signal.SIGTERM)
    try:
        node.wait(timeout)
    except subprocess.TimeoutExpired:
        node.kill()
        node.wait()
    shutil.rmtree(os.path.dirname(sock), ignore_errors=True)


def wait_ready(client: Any, node: Any, timeout: float = 120.0) -> None:
    """Return once the node runs an exec (its ``python3`` template is up and warm)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node.poll() is not None:
            raise SystemExit("the node exited during start-up")
        with contextlib.suppress(Exception):
            client.exec_once("python3", code="pass", timeout_seconds=30)
            return
        time.sleep(0.1)
    raise SystemExit("the node did not start in time")


@contextlib.contextmanager
def humaneval_groups(prefix: str) -> Iterator[tuple[Any, Any, Any]]:
    """A node, its client and a HumanEval G=4 x K=8 vector env, warmed up by one episode.

    ``(node process, client, envs)``; the env is closed and the node stopped after.
    """
    from collimate_rl.bench import grpo
    from collimate_rl.wire import CollimateClient

    node, sock = start(prefix)
    try:
        client = CollimateClient(unix_socket=sock)
        wait_ready(client, node)
        envs = grpo.open_vector_env(client, "humaneval", 4, 8)
        try:
            grpo.run_episodes(envs, 1, warmup=True, first=0)
            yield node, client, envs
        finally:
            envs.close()
    finally:
        stop(node, sock)
