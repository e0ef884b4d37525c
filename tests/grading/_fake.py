"""A test double for the node: runs an exec as a plain ``python3`` subprocess.

It writes the exec's files and code into a private temporary directory (the
payload's absolute ``/tmp/colgrade_*`` path is mapped into it), exports
``COLLIMATE_SEED`` / ``COLLIMATE_CODE_FILE`` and merges stderr into stdout,
like the contract's local backend. No isolation: this exercises the harness
logic only.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from collimate_rl.errors import CollimateTransportError


class SubprocessClient:
    def __init__(self) -> None:
        self.calls = 0
        self.fail_after: int | None = None  # raise infra errors from this call on

    def exec_once(
        self,
        template_id: str,
        *,
        code: str,
        files: list[dict[str, str]] | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise CollimateTransportError("POST /v1/exec: connection refused")
        seed = seed or secrets.token_hex(32)
        with tempfile.TemporaryDirectory(prefix="colfake_") as tmp:
            root = Path(tmp)
            for f in files or []:
                path = Path(f["path"])
                if path.is_absolute():
                    code = code.replace(repr(f["path"]), repr(str(root / path.name)))
                    path = root / path.name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f["content"], encoding="utf-8")
            code_file = root / "colcode.py"
            code_file.write_text(code, encoding="utf-8")
            env = {
                "COLLIMATE_SEED": seed,
                "COLLIMATE_CODE_FILE": str(code_file),
                "PATH": os.environ.get("PATH", ""),
            }
            start = time.monotonic()
            try:
                proc = subprocess.run(
                    [sys.executable, "-I", "-S", str(code_file)],
                    cwd=tmp,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_seconds,
                    start_new_session=True,
                )
                out, exit_code = proc.stdout.decode("utf-8", "replace"), proc.returncode
            except subprocess.TimeoutExpired as exc:
                out = (exc.stdout or b"").decode(
                    "utf-8", "replace"
                ) + f"timeout after {float(timeout_seconds)}s"
                exit_code = -1
            ms = round((time.monotonic() - start) * 1000, 2)
        return {
            "stdout": out,
            "stderr": "",
            "exit_code": exit_code,
            "fork_time_ms": 0.0,
            "exec_time_ms": ms,
            "total_time_ms": ms,
            "seed": seed,
            "seed_ack": "off",
        }
