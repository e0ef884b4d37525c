"""What :class:`Sandbox` and :class:`AsyncSandbox` share: the state, and every operation.

Each operation is a generator of client calls (see :mod:`collimate_rl.wire._operations`);
:mod:`._sandbox` drives them with blocking calls and :mod:`._async_sandbox` awaits them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar

from collimate_rl.errors import CollimateError, CollimateUsageError
from collimate_rl.sandbox._files import ScriptFlow
from collimate_rl.sandbox._forkgroup import ChildInfo, check_fork_args, fork_kind, fork_op
from collimate_rl.sandbox._result import ExecResult
from collimate_rl.seeds import is_valid_seed
from collimate_rl.wire._operations import ClientCall, Op, field_of

__all__ = ["WARM_FORK_MS"]

T = TypeVar("T")

#: A fork at most this slow (ms) was served from the warm pool.
WARM_FORK_MS: Final = 1.0


def _endpoints(resp: Any) -> dict[str, str]:
    raw = field_of(resp, "endpoints") or {}
    return {str(k): str(v) for k, v in dict(raw).items()}


class _SandboxCore:
    """State and operations shared by :class:`Sandbox` and :class:`AsyncSandbox`."""

    def __init__(
        self,
        template: str,
        *,
        client: Any,
        egress: Mapping[str, Any] | None = None,
        default_timeout: int = 60,
        keep_on_error: bool = False,
        default_seed: str | None = None,
        label: str | None = None,
        secret_refs: Sequence[str] | None = None,
    ) -> None:
        if not isinstance(template, str):
            raise CollimateUsageError(f"template must be a str, got {type(template).__name__}")
        if default_seed is not None and not is_valid_seed(default_seed):
            raise CollimateUsageError(
                f"default_seed must be 64 hex characters, got {default_seed!r}"
            )
        self.template = template
        self.client = client
        self.egress = dict(egress) if egress is not None else None
        self.default_timeout = default_timeout
        self.keep_on_error = keep_on_error
        self.default_seed = default_seed
        self.label = label
        self.secret_refs = list(secret_refs) if secret_refs else None
        self.session_id: str | None = None
        self.fork_time_ms: float | None = None
        self.endpoints: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(template={self.template!r}, session_id={self.session_id!r})"

    @property
    def warm_hit(self) -> bool:
        """Whether the fork was served from the warm pool (``0 <= fork_time_ms <= 1.0``)."""
        return self.fork_time_ms is not None and 0.0 <= self.fork_time_ms <= WARM_FORK_MS

    @property
    def started(self) -> bool:
        """Whether the sandbox holds a live session."""
        return self.session_id is not None

    # -- operations ------------------------------------------------------------

    def _attach_op(self, session_id: str) -> Op[None]:
        info = yield ClientCall("get_session", (session_id,))
        self.template = str(field_of(info, "template_id") or field_of(info, "template") or "")
        self.session_id = session_id

    def _start_op(self) -> Op[None]:
        if self.session_id is not None:
            return
        if self.label is not None or self.secret_refs:
            if not callable(getattr(self.client, "create_sandbox", None)):
                raise CollimateUsageError(
                    "label and secret_refs need the gateway transport (create_sandbox); "
                    f"{type(self.client).__name__} has neither"
                )
            options = {"label": self.label, "egress": self.egress, "secret_refs": self.secret_refs}
            resp = yield ClientCall("create_sandbox", (self.template,), options)
        else:
            resp = yield ClientCall("create_session", (self.template,), {"egress": self.egress})
        sid = field_of(resp, "session_id") or field_of(resp, "id")
        if not isinstance(sid, str) or not sid:
            raise CollimateError(f"create_session returned no session_id: {resp!r}")
        self.session_id = sid
        fork_ms = field_of(resp, "fork_time_ms", -1)
        self.fork_time_ms = float(fork_ms) if fork_ms is not None else -1.0
        self.endpoints = _endpoints(resp)

    def _close_op(self) -> Op[None]:
        sid, self.session_id = self.session_id, None
        if sid is None:
            return
        try:
            yield ClientCall("delete_session", (sid,))
        except Exception:
            return  # close never raises; the server's session TTL is the backstop

    def _exec_call(
        self,
        *,
        code: str | None,
        command: str | None,
        commands: Sequence[Sequence[str]] | None,
        files: Sequence[Mapping[str, str]] | None,
        timeout_seconds: int | None,
        seed: str | None,
    ) -> ClientCall:
        if self.session_id is None:
            raise CollimateUsageError("the sandbox is not started")
        kwargs: dict[str, Any] = {"timeout_seconds": timeout_seconds or self.default_timeout}
        for key, value in (
            ("command", command),
            ("code", code),
            ("commands", commands),
            ("files", files),
            ("seed", seed if seed is not None else self.default_seed),
        ):
            if value is not None:
                kwargs[key] = value
        return ClientCall("session_exec", (self.session_id,), kwargs)

    def _exec_op(
        self,
        code: str | None = None,
        *,
        command: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int | None = None,
        seed: str | None = None,
    ) -> Op[ExecResult]:
        if code is None and command is None and commands is None:
            raise CollimateUsageError("one of command/code/commands is required")
        yield from self._start_op()
        call = self._exec_call(
            code=code,
            command=command,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
        )
        resp = yield call
        return ExecResult.from_response(resp)

    def _script_op(self, flow: ScriptFlow[T], timeout_seconds: int | None) -> Op[T]:
        """Run a script flow (upload/download): each script is one ``command`` exec."""
        try:
            yield from self._start_op()
        except Exception:
            flow.close()
            raise
        try:
            script = next(flow)
            while True:
                try:
                    resp = yield self._exec_call(
                        code=None,
                        command=script,
                        commands=None,
                        files=None,
                        timeout_seconds=timeout_seconds,
                        seed=None,
                    )
                except Exception as exc:
                    script = flow.throw(exc)
                else:
                    script = flow.send(ExecResult.from_response(resp))
        except StopIteration as stop:
            value: T = stop.value
            return value
        finally:
            flow.close()

    def _fork_op(
        self, n: int, *, labels: Sequence[str] | None, max_per_call: int | None
    ) -> Op[list[ChildInfo]]:
        kind = fork_kind(self.client)
        check_fork_args(kind, n, labels)  # before the parent is started
        yield from self._start_op()
        if self.session_id is None:  # for the type checker; _start_op sets it
            raise CollimateError("the sandbox has no session to fork")
        return (yield from fork_op(kind, self.session_id, n, cap=max_per_call, labels=labels))

    def _child_kwargs(self, seed: str | None, timeout: int | None) -> dict[str, Any]:
        return {
            "template": self.template,
            "default_timeout": timeout if timeout is not None else self.default_timeout,
            "keep_on_error": self.keep_on_error,
            "default_seed": seed,
        }

    def _adopt_child(self, child: _SandboxCore, info: ChildInfo) -> None:
        child.session_id = info.id
        child.fork_time_ms = info.fork_time_ms
        child.endpoints = dict(info.endpoints)
        child.egress = self.egress

    def _connect_url_op(self, port: int, ttl_seconds: int, protocol: str) -> Op[str]:
        if not callable(getattr(self.client, "connect_url", None)):
            raise CollimateError(
                "connect_url/cdp_url need the gateway transport (GatewayClient); "
                f"{type(self.client).__name__} has no host->guest ingress"
            )
        yield from self._start_op()
        resp = yield ClientCall(
            "connect_url",
            (self.session_id, port),
            {"ttl_seconds": ttl_seconds, "protocol": protocol},
        )
        return str(field_of(resp, "url", ""))
