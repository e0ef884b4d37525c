"""``client.env(...)``: the clients' door to environments, which the layer above provides.

An environment (a template, a declared width, sandboxes handed out on it) is
made of :class:`~collimate_rl.sandbox.Sandbox` handles, one layer above the
wire clients. So the clients do not import it: :mod:`collimate_rl.templates`
hands its two factories to :func:`provide_environments` when it is imported
(``import collimate_rl`` always imports it), and ``client.env(...)`` calls
whichever was provided. The wire layer only knows the factories' shape.

>>> def make(client, ref, *, width, name, ready, env, secrets):
...     return (ref, width)
>>> async def amake(client, ref, *, width, name, ready, env, secrets):
...     return (ref, width)
>>> saved = environment_factories()
>>> provide_environments(make, amake)
>>> environment_factories()[0](None, "python3", width=2, name=None, ready=None,
...                            env=None, secrets=None)
('python3', 2)
>>> provide_environments(*saved)
"""

from __future__ import annotations

from typing import Any, Protocol

from collimate_rl.errors import CollimateUsageError

__all__ = [
    "AsyncEnvironmentFactory",
    "EnvironmentFactory",
    "environment_factories",
    "provide_environments",
]


class EnvironmentFactory(Protocol):
    """Makes the environment ``client.env(ref, ...)`` returns (``collimate_rl.templates.environment``)."""

    def __call__(
        self,
        client: Any,
        ref: str,
        *,
        width: int | None,
        name: str | None,
        ready: Any,
        env: Any,
        secrets: Any,
    ) -> Any: ...


class AsyncEnvironmentFactory(Protocol):
    """The async twin of :class:`EnvironmentFactory` (``environment_async``)."""

    async def __call__(
        self,
        client: Any,
        ref: str,
        *,
        width: int | None,
        name: str | None,
        ready: Any,
        env: Any,
        secrets: Any,
    ) -> Any: ...


_provided: list[tuple[EnvironmentFactory, AsyncEnvironmentFactory]] = []


def provide_environments(sync: EnvironmentFactory, asynchronous: AsyncEnvironmentFactory) -> None:
    """Set the factories ``client.env`` calls (the last call wins)."""
    _provided[:] = [(sync, asynchronous)]


def environment_factories() -> tuple[EnvironmentFactory, AsyncEnvironmentFactory]:
    """The provided factories.

    Raises:
        CollimateUsageError: none were provided (``collimate_rl.templates`` was
            never imported, which ``import collimate_rl`` rules out).
    """
    if not _provided:
        raise CollimateUsageError(
            "client.env(...) needs collimate_rl.templates: `import collimate_rl` loads it"
        )
    return _provided[0]
