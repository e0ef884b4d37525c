"""Where the node listens: loopback by default; a wider bind is an explicit, logged opt-in."""

from __future__ import annotations

import pytest

from collimate_rl.node.runtime.base import Isolation
from collimate_rl.node.server import build_parser, serve


class _RefusesToStart:
    """A runtime that fails at start: serve() binds, logs, then stops at once."""

    isolation = Isolation.NONE

    async def start(self) -> None:
        raise RuntimeError("not starting")

    async def close(self) -> None:
        pass

    def templates(self) -> list[str]:
        return []


def test_serve_defaults_to_loopback_and_warns_on_a_wide_bind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert build_parser().parse_args([]).host == "127.0.0.1"
    for host in ("127.0.0.1", "0.0.0.0"):
        caplog.clear()
        with caplog.at_level("INFO", logger="collimate_rl.node"), pytest.raises(RuntimeError):
            serve(host=host, port=0, runtime=_RefusesToStart())  # type: ignore[arg-type]
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        if host == "0.0.0.0":
            assert any("listens on 0.0.0.0" in w and "--token-file" in w for w in warnings)
        else:
            assert warnings == []
            assert "every local user" in caplog.text  # TCP without a token: said, not warned
