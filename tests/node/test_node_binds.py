"""Where the node listens: loopback by default; a wider bind is an explicit, logged opt-in."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from collimate_rl.node.runtime.base import Isolation
from collimate_rl.node.server import bind_unix_socket, build_parser, serve
from tests._other_user import connect_as_other_user, needs_root


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


@needs_root
def test_another_local_user_cannot_open_the_nodes_socket(tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(dir="/tmp", prefix="node-sock-"))
    try:
        folder.chmod(0o755)  # the folder does not stop them: the socket's own mode must
        sock = bind_unix_socket(folder / "node.sock")
        try:
            seen = connect_as_other_user(
                str(folder / "node.sock"), b"GET /v1/health HTTP/1.0\r\n\r\n"
            )
            assert seen == "error PermissionError", seen
        finally:
            sock.close()
    finally:
        shutil.rmtree(folder)


def test_a_refused_start_leaves_no_socket(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from collimate_rl.node.server import main

    sock = tmp_path / "node.sock"
    common = ["--socket", str(sock), "--isolation", "none", "--state-dir", str(tmp_path / "s")]
    assert main([*common, "--sandbox-uid", "0"]) == 1
    last = capsys.readouterr().err.splitlines()[-1]  # one line, no traceback
    assert last.startswith("collimate serve: ValueError:") and "never root" in last
    assert not sock.exists() and not (tmp_path / "s").exists()
