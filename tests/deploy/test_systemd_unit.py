"""The shipped systemd unit: systemd itself verifies it, and its flags are `collimate serve`'s."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from collimate_rl.node.server import build_parser, config_from_args

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "collimate-node.service"
SHIPPED_BINARY = "/opt/collimate/bin/collimate"


def _service() -> dict[str, str]:
    # systemd's format is close enough to INI for the keys read here (no repeated keys)
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text().replace("\\\n", " "))
    return dict(parser["Service"])


def test_the_units_flags_are_serves_flags_and_ask_for_what_the_issue_asks() -> None:
    service = _service()
    argv = shlex.split(service["ExecStart"])
    assert argv[:2] == [SHIPPED_BINARY, "serve"]
    flags = [a.replace("${CREDENTIALS_DIRECTORY}", "/run/credentials/x") for a in argv[2:]]
    args = build_parser().parse_args(flags)
    config_from_args(args)  # valid values too
    assert args.socket == "/run/collimate/node.sock"  # a unix socket...
    assert service["Group"] == "collimate" and service["RuntimeDirectoryMode"] == "0750"
    assert args.token_file == "/run/credentials/x/token"  # ...a token...
    assert (
        args.state_dir.startswith("/var/lib/collimate") and service["StateDirectory"] == "collimate"
    )
    assert service["Restart"] == "on-failure"  # ...restarted when it crashes
    # the stop timeout leaves room for the drain
    assert float(service["TimeoutStopSec"]) > args.drain_timeout
    assert args.log_format == "json"


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    collimate = Path(sys.executable).with_name("collimate")
    assert collimate.exists(), collimate
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace(SHIPPED_BINARY, str(collimate)))
    done = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    about_ours = [line for line in done.stderr.splitlines() if UNIT.name in line]
    assert done.returncode == 0 and not about_ours, done.stderr
    # and it is not a check that passes whatever the unit says
    broken = tmp_path / "broken" / UNIT.name
    broken.parent.mkdir()
    broken.write_text(unit.read_text().replace("Restart=on-failure", "Restart=sometimes"))
    bad = subprocess.run(
        [analyze, "verify", "--man=no", str(broken)], capture_output=True, text=True, timeout=60
    )
    assert "restart specifier" in bad.stderr
