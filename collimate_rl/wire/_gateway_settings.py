"""What both gateway clients share: the key, its tier and fork cap, the origin."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime

from collimate_rl.errors import CollimateUsageError
from collimate_rl.wire._base import ClientBase, check_url
from collimate_rl.wire._env import ENV_API_KEY, ENV_BASE_URL
from collimate_rl.wire._gateway_flows import DEFAULT_GATEWAY_URL, fork_cap, parse_tier

__all__ = ["Commands", "Files", "Stamp"]

Files = Sequence[Mapping[str, str]]
Commands = Sequence[Sequence[str]]
Stamp = str | datetime | None


class _GatewaySettings(ClientBase):
    _gateway = True

    def _init_gateway(self, api_key: str | None, base_url: str | None) -> dict[str, str]:
        key = api_key or os.environ.get(ENV_API_KEY)
        if not key:
            raise CollimateUsageError(
                f"an API key is required: pass api_key=... or set {ENV_API_KEY}"
            )
        self.api_key = key
        #: ``demo``, ``pro``, ``ent``, or None for a key without a known tier.
        self.tier = parse_tier(key)
        #: The most children one fork call may ask for (demo 4, pro 32, ent 64; else 32).
        self.fork_cap = fork_cap(self.tier)
        origin = base_url or os.environ.get(ENV_BASE_URL) or DEFAULT_GATEWAY_URL
        self.base = check_url(origin)
        return {"Authorization": f"Bearer {key}"}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base={self.base!r}, tier={self.tier!r})"
