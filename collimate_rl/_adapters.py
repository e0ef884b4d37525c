"""What every adapter shares: config lookup, one client per target, rows -> tasks, CRN seeds.

The framework adapters (SkyRL, slime, TRL, verl) all turn a dataset row into
the same three things, here and only here:

* a :class:`RowTask`: the row's ground truth translated **once** into a reward
  spec (:func:`~collimate_rl.grading.reward_spec_from_ground_truth`), shaped like
  a :class:`~collimate_envs.tasks.Task` so the ``collimate_envs`` envs can run it;
* a common-random-numbers key, ``"<data_source>:<id>"``, where ``id`` is the
  row's ``crn_key``, ``uid`` or ``index``, else its prompt text. This is the
  same ``"<task set>:<task id>"`` key the envs use, so a row graded by slime and
  the same row run as a SkyRL env get the same seed;
* an exec seed for a seed mode (:func:`row_seed`).

>>> key = crn_key("lcb", None, [{"role": "user", "content": "add two numbers"}])
>>> key
'lcb:add two numbers'
>>> row_seed("crn", None, key) == row_seed("crn", None, key)
True
>>> row_seed("vanilla", None, key) is None
True
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from collimate_rl.errors import CollimateUsageError
from collimate_rl.seeds import DET_SEED, MODES, is_valid_seed, seed_from_key

__all__ = [
    "AdapterConfig",
    "RowTask",
    "RowTaskSet",
    "build_spec",
    "crn_key",
    "first_of",
    "get",
    "ground_truth_of",
    "prompt_text",
    "row_seed",
    "shared_client",
    "spec_and_seed",
]

_MISSING = object()


def get(source: Any, name: str, default: Any = None) -> Any:
    """``source[name]`` for mappings (dicts, omegaconf ``DictConfig``), else ``source.name``.

    >>> get({"a": 1}, "a"), get(None, "a", 2)
    (1, 2)
    """
    if source is None:
        return default
    if isinstance(source, Mapping) or (hasattr(source, "get") and hasattr(source, "keys")):
        try:
            value = source.get(name, _MISSING)
        except Exception:  # an omegaconf missing-value error: treat as unset
            value = _MISSING
    else:
        value = getattr(source, name, _MISSING)
    return default if value is _MISSING else value


@dataclass(frozen=True)
class AdapterConfig:
    """The knobs every adapter reads (each from the framework's config, then ``COLLIMATE_*``).

    Attributes:
        template: the template graded in (``"python3"`` on a local node).
        timeout_seconds: per exec.
        seed_mode: ``vanilla`` (the node draws a seed), ``crn`` (one seed per
            row key) or ``deterministic`` (``base_seed`` or the fixed default).
        base_seed: 64 hex chars; the CRN salt, or the deterministic seed.
        entry: the function name, overriding the one the ground truth implies.
        format: the ground-truth format (``"auto"`` detects it).
        all_or_nothing: reward 1.0 only when every test passes; ``None``: the
            ground truth's own rule (see ``reward_spec_from_ground_truth``).
        concurrency: execs in flight for batch hooks.
        base_url, api_key, unix_socket: where the node or gateway is; unset ->
            ``$COLLIMATE_SERVE_SOCKET`` / ``$COLLIMATE_API_KEY`` /
            ``$COLLIMATE_SERVE_URL``, else the embedded local node.
    """

    template: str = "python3"
    timeout_seconds: int = 30
    seed_mode: str = "vanilla"
    base_seed: str | None = None
    entry: str | None = None
    format: str = "auto"
    all_or_nothing: bool | None = None
    concurrency: int = 16
    base_url: str | None = None
    api_key: str | None = None
    unix_socket: str | None = None

    @classmethod
    def resolve(
        cls, source: Any = None, *, prefix: str = "", overrides: Mapping[str, Any] | None = None
    ) -> AdapterConfig:
        """Read each field from ``overrides``, ``source`` (``<prefix><name>``), then the env.

        ``None`` and ``""`` fall through; the env var is ``COLLIMATE_<NAME>``.

        >>> AdapterConfig.resolve({"collimate_timeout_seconds": "5"}, prefix="collimate_").timeout_seconds
        5
        """
        values: dict[str, Any] = {}
        for name, default in cls.__dataclass_fields__.items():
            value = (overrides or {}).get(name)
            if value in (None, ""):
                value = get(source, prefix + name)
            if value in (None, "") and name == "template":  # collimate 0.8.0's key
                value = get(source, prefix + "template_id")
            if value in (None, ""):
                value = os.environ.get("COLLIMATE_" + name.upper()) or None
            values[name] = default.default if value in (None, "") else value
        config = cls(
            template=str(values["template"]),
            timeout_seconds=int(values["timeout_seconds"]),
            seed_mode=str(values["seed_mode"]),
            base_seed=values["base_seed"],
            entry=values["entry"],
            format=str(values["format"]),
            all_or_nothing=None
            if values["all_or_nothing"] is None
            else _bool(values["all_or_nothing"]),
            concurrency=max(1, int(values["concurrency"])),
            base_url=values["base_url"],
            api_key=values["api_key"],
            unix_socket=values["unix_socket"],
        )
        if config.seed_mode not in MODES:
            raise CollimateUsageError(
                f"seed_mode must be one of {', '.join(MODES)}, got {config.seed_mode!r}"
            )
        if config.base_seed is not None and not is_valid_seed(config.base_seed):
            raise CollimateUsageError("base_seed must be 64 hex characters")
        return config

    def client(self) -> Any:
        """The process-wide client for this config's target (see :func:`shared_client`)."""
        return shared_client(self.base_url, self.api_key, self.unix_socket, self.timeout_seconds)


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


_clients_lock = threading.Lock()
_clients: dict[tuple[Any, ...], Any] = {}


def shared_client(
    base_url: str | None, api_key: str | None, unix_socket: str | None, timeout_seconds: int
) -> Any:
    """One thread-safe sync client per target and process (framework workers make many envs).

    With no target given and no ``COLLIMATE_SERVE_SOCKET`` / ``COLLIMATE_API_KEY``
    / ``COLLIMATE_SERVE_URL`` set, this is the embedded local node's client, as
    for the ``collimate_envs`` envs.
    """
    explicit = any((base_url, api_key, unix_socket))
    ambient = any(
        os.environ.get(v)
        for v in ("COLLIMATE_SERVE_SOCKET", "COLLIMATE_API_KEY", "COLLIMATE_SERVE_URL")
    )
    if not explicit and not ambient:
        from collimate_envs._backend import shared_local_client

        return shared_local_client()
    key = (base_url, api_key, unix_socket, timeout_seconds)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            from collimate_rl.wire import connect

            client = connect(
                base_url, api_key=api_key, unix_socket=unix_socket, timeout=timeout_seconds + 30
            )
            _clients[key] = client
        return client


def prompt_text(prompt: Any) -> str:
    """The prompt as text: a string as is, a chat list as its last user message's content.

    >>> prompt_text([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    'u'
    """
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        users = [m for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        if users:
            return str(users[-1].get("content", ""))
    if prompt is None:
        return ""
    try:
        return json.dumps(prompt, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(prompt)


def crn_key(data_source: Any, key: Any, prompt: Any) -> str:
    """The CRN key of a row: ``"<data_source>:<key>"``, the prompt text standing in for ``key``."""
    ident = prompt_text(prompt) if key in (None, "") else str(key)
    return f"{data_source or ''}:{ident}"


def row_seed(mode: str, base_seed: str | None, key: str, explicit: Any = None) -> str | None:
    """The exec seed of a row under ``mode`` (``None``: let the node draw one).

    ``crn``: ``explicit`` if it is a valid seed, else ``seed_from_key(key,
    salt=base_seed or "")`` (what :mod:`collimate_envs` derives for the task
    ``key``); ``deterministic``: ``base_seed`` or :data:`DET_SEED`.
    """
    if mode == "deterministic":
        return base_seed or DET_SEED
    if mode == "crn":
        if is_valid_seed(explicit):
            return str(explicit)
        return seed_from_key(key, salt=base_seed or "")
    if mode == "vanilla":
        return None
    raise CollimateUsageError(f"seed_mode must be one of {', '.join(MODES)}, got {mode!r}")


def ground_truth_of(direct: Any, *containers: Any) -> Any:
    """``direct`` if set, else the first container's ``ground_truth`` or ``reward_spec.ground_truth``.

    >>> ground_truth_of(None, {"reward_spec": {"ground_truth": "assert f()"}})
    'assert f()'
    >>> ground_truth_of({"inputs": ["1"], "outputs": ["1"]})
    {'inputs': ['1'], 'outputs': ['1']}
    """
    if direct not in (None, ""):
        return direct
    for container in containers:
        found = get(container, "ground_truth")
        if found in (None, ""):
            found = get(get(container, "reward_spec"), "ground_truth")
        if found not in (None, ""):
            return found
    raise CollimateUsageError(
        "the row has no ground truth: expected a label, a ground_truth field or "
        "reward_spec['ground_truth']"
    )


def build_spec(config: AdapterConfig, ground_truth: Any) -> Any:
    """The reward spec of a ground truth: the one translation every adapter uses."""
    from collimate_rl.grading import reward_spec_from_ground_truth

    return reward_spec_from_ground_truth(
        ground_truth,
        format=config.format,  # type: ignore[arg-type]
        entry=config.entry,
        all_or_nothing=config.all_or_nothing,
    )


def spec_and_seed(
    config: AdapterConfig,
    ground_truth: Any,
    *,
    data_source: Any = None,
    key: Any = None,
    prompt: Any = None,
    explicit_seed: Any = None,
    cache: dict[str, Any] | None = None,
) -> tuple[Any, str | None]:
    """A row's reward spec (built once per distinct ground truth in ``cache``) and exec seed."""
    try:
        memo = json.dumps(ground_truth, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        memo = repr(ground_truth)
    spec = None if cache is None else cache.get(memo)
    if spec is None:
        spec = build_spec(config, ground_truth)
        if cache is not None:
            cache[memo] = spec
    seed = row_seed(
        config.seed_mode, config.base_seed, crn_key(data_source, key, prompt), explicit_seed
    )
    return spec, seed


def first_of(source: Any, *names: str) -> Any:
    """The first of ``names`` set (not ``None`` or ``""``) in ``source``, else ``None``."""
    for name in names:
        value = get(source, name)
        if value not in (None, ""):
            return value
    return None


@dataclass(frozen=True)
class RowTask:
    """A dataset row as a task the ``collimate_envs`` envs can run.

    It has the parts of :class:`~collimate_envs.tasks.Task` the envs use; its
    reward spec was built once, from the row's ground truth.
    """

    task_id: str
    prompt: str
    spec: Any
    difficulty: str | None = None

    @classmethod
    def from_ground_truth(
        cls, task_id: str, prompt: str, ground_truth: Any, config: AdapterConfig
    ) -> RowTask:
        return cls(task_id=task_id, prompt=prompt, spec=build_spec(config, ground_truth))

    def to_reward_spec(self, **options: Any) -> Any:
        return self.spec


@dataclass(frozen=True)
class RowTaskSet:
    """One row's task, named by its data source, as a task set (the envs' CRN key is ``name:id``)."""

    name: str
    task: RowTask

    def __iter__(self) -> Iterator[RowTask]:
        return iter((self.task,))
