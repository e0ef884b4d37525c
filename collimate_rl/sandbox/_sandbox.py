"""The SDK's handle on one sandbox, over any transport (local node, daemon, gateway).

Everything a :class:`Sandbox` does is an operation in :class:`._operations._SandboxCore`
(a generator of client calls, see :mod:`collimate_rl.wire._operations`);
:class:`Sandbox` drives them with blocking calls and its async twin
(:mod:`._async_sandbox`) awaits them. The two classes hold no logic of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from collimate_rl.sandbox._files import download_flow, upload_flow
from collimate_rl.sandbox._forkgroup import ChildInfo, ForkGroup
from collimate_rl.sandbox._operations import WARM_FORK_MS, _SandboxCore
from collimate_rl.sandbox._result import ExecResult
from collimate_rl.seeds import group_seeds
from collimate_rl.wire import connect
from collimate_rl.wire._operations import drive

__all__ = ["WARM_FORK_MS", "Sandbox"]


class Sandbox(_SandboxCore):
    """A handle on one sandbox session over any transport; a context manager.

    Creating the handle sends nothing; :meth:`start` (or entering the ``with``
    block, or the first exec) creates the session, and :meth:`close` (or
    leaving the block, exceptions included) deletes it, unless the block
    raised and ``keep_on_error`` is set.

    Args:
        template: the template id to fork from (e.g. ``"python3"`` on the local node).
        client: any client with the daemon-parity surface (``CollimateClient``,
            ``GatewayClient``, the local node's client); default ``connect()``.
        egress: an egress policy for the session (networked templates only).
        default_timeout: guest timeout in seconds when an exec gives none.
        keep_on_error: leave the session alive when the ``with`` block raises.
        default_seed: the seed for execs that give none (64 hex characters).
        label: a label for the sandbox (gateway only).
        secret_refs: names of secrets to mount at create time (gateway only).

    Attributes:
        session_id: the live session's id, or ``None`` before start / after close.
        fork_time_ms: the create's fork time (``None`` for adopted sessions).
        endpoints: exposed ports of the session, ``{"<port>": "<host>:<port>"}``.

    >>> from collimate_rl.sandbox._shell import ShellClient
    >>> with Sandbox("python3", client=ShellClient()) as box:
    ...     box.upload_bytes("data/blob.bin", b"\\x00\\x01no newline")
    ...     box.exec(command="wc -c < data/blob.bin").stdout
    ...     box.download("data/blob.bin")
    '12\\n'
    b'\\x00\\x01no newline'
    """

    def __init__(
        self,
        template: str,
        *,
        client: Any = None,
        egress: Mapping[str, Any] | None = None,
        default_timeout: int = 60,
        keep_on_error: bool = False,
        default_seed: str | None = None,
        label: str | None = None,
        secret_refs: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            template,
            client=client if client is not None else connect(),
            egress=egress,
            default_timeout=default_timeout,
            keep_on_error=keep_on_error,
            default_seed=default_seed,
            label=label,
            secret_refs=secret_refs,
        )

    @classmethod
    def attach(cls, client: Any, session_id: str, **kwargs: Any) -> Sandbox:
        """Adopt a live session after checking it exists (``get_session``).

        The template is taken from the session's info. A missing session
        raises the client's 404 (``no_such_session``) error. Closing the
        handle deletes the session.

        >>> from collimate_rl.sandbox._shell import ShellClient
        >>> client = ShellClient()
        >>> sid = client.create_session("python3")["session_id"]
        >>> box = Sandbox.attach(client, sid)
        >>> box.template, box.session_id == sid
        ('python3', True)
        """
        box = cls("", client=client, **kwargs)
        drive(box._attach_op(session_id), client)
        return box

    @classmethod
    def adopt(cls, client: Any, session_id: str, *, template: str = "", **kwargs: Any) -> Sandbox:
        """Adopt a session without checking it; a bad id surfaces at the first exec."""
        box = cls(template, client=client, **kwargs)
        box.session_id = session_id
        return box

    def start(self) -> Sandbox:
        """Create the session (a no-op when already started); returns ``self``."""
        drive(self._start_op(), self.client)
        return self

    def close(self) -> None:
        """Delete the session if there is one. Idempotent; never raises."""
        drive(self._close_op(), self.client)

    def reset(self) -> None:
        """Close, then start a fresh copy-on-write clone of the template."""
        self.close()
        self.start()

    def exec(
        self,
        code: str | None = None,
        *,
        command: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int | None = None,
        seed: str | None = None,
    ) -> ExecResult:
        """Run code, a shell command or argv lists in the session (starting it if needed).

        A non-zero exit or a guest timeout (``exit_code == -1``) is data in the
        result; infrastructure failures raise. Note that ``files`` are written
        as text (and may gain a final newline on the real daemon): use
        :meth:`upload_bytes` for exact bytes.

        Args:
            code: source for the template's interpreter.
            command: a shell command line (wins over ``commands`` and ``code``).
            commands: argv lists.
            files: ``[{"path", "content"}]`` written before running.
            timeout_seconds: the guest timeout (default ``default_timeout``).
            seed: 64 hex characters (default ``default_seed``).
        """
        return drive(
            self._exec_op(
                code,
                command=command,
                commands=commands,
                files=files,
                timeout_seconds=timeout_seconds,
                seed=seed,
            ),
            self.client,
        )

    def upload_bytes(
        self,
        path: str,
        data: bytes | bytearray | memoryview,
        *,
        timeout_seconds: int | None = None,
    ) -> None:
        """Write ``data`` to ``path`` in the sandbox, byte-exact, over exec alone.

        Verified in the sandbox by size and sha256 and moved into place
        atomically; a failed upload leaves the target untouched.

        Raises:
            TypeError: ``data`` is not bytes-like.
            CollimateTaskError: the sandbox could not write or verify the file.
        """
        drive(self._script_op(upload_flow(path, data), timeout_seconds), self.client)

    def download(
        self, path: str, *, timeout_seconds: int | None = None, max_bytes: int | None = None
    ) -> bytes:
        """Read ``path`` from the sandbox, byte-exact (any size: 11 MiB per exec).

        Raises:
            CollimateTaskError: no such file, over ``max_bytes``, or output that
                fails the framing, base64, size or sha256 checks.
        """
        return drive(
            self._script_op(download_flow(path, max_bytes=max_bytes), timeout_seconds),
            self.client,
        )

    def fork(
        self,
        n: int = 1,
        *,
        labels: Sequence[str] | None = None,
        max_per_call: int | None = None,
    ) -> list[Sandbox]:
        """Fork the session into exactly ``n`` child sandboxes (or none, on error).

        Children share the parent's template, timeout and seed; the caller
        owns and closes them. The parent should be quiescent while forking.
        """
        infos = drive(self._fork_op(n, labels=labels, max_per_call=max_per_call), self.client)
        return [self._child(info, self.default_seed, None) for info in infos]

    def fork_group(
        self,
        n: int,
        *,
        seed_mode: str = "crn",
        base_seed: str | None = None,
        labels: Sequence[str] | None = None,
        default_timeout: int | None = None,
        max_per_call: int | None = None,
    ) -> ForkGroup[Sandbox]:
        """Fork into a :class:`ForkGroup` of exactly ``n`` children (strict width).

        Args:
            n: the width.
            seed_mode: how the children's default seeds relate (``crn``: one
                shared seed; ``vanilla``: none; ``deterministic``: a fixed one).
            base_seed: the seed ``crn``/``deterministic`` use.
            labels: one label per child (gateway only).
            default_timeout: the children's default timeout (default: the parent's).
            max_per_call: children per fork call (default: the gateway tier's
                cap, or :data:`NODE_FORK_MAX` on the local node).

        Raises:
            ForkShortError: a fork call returned fewer children (none are left).
        """
        seeds = group_seeds(n, seed_mode, base_seed) if isinstance(n, int) else []
        infos = drive(self._fork_op(n, labels=labels, max_per_call=max_per_call), self.client)
        children = [
            self._child(info, seed, default_timeout)
            for info, seed in zip(infos, seeds, strict=True)
        ]
        return ForkGroup(self, children, seeds)

    def _child(self, info: ChildInfo, seed: str | None, timeout: int | None) -> Sandbox:
        child = Sandbox(client=self.client, **self._child_kwargs(seed, timeout))
        self._adopt_child(child, info)
        return child

    def connect_url(self, port: int, *, ttl_seconds: int = 600, protocol: str = "tcp") -> str:
        """A URL reaching ``port`` inside the sandbox (gateway only)."""
        return drive(self._connect_url_op(port, ttl_seconds, protocol), self.client)

    def cdp_url(self, *, ttl_seconds: int = 600) -> str:
        """A Chrome DevTools URL for the browser in the sandbox (gateway only)."""
        return self.connect_url(9222, ttl_seconds=ttl_seconds, protocol="cdp")

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and self.keep_on_error:
            return
        self.close()
