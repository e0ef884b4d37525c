"""A task's files in a sandbox: write a snapshot, list what is there, read and write changes.

Everything goes through plain ``command`` execs (``sh``, ``tar``, ``base64``, ``find``,
``sha256sum``), so it works on any template or image that has a shell and coreutils;
payloads travel as base64 in framed output, checked host-side.

>>> out = "a" * 64 + "  ./calc.py\\n@@COLLIMATE_LINKS@@\\n./link\\n"
>>> sorted(_listing_entries(out).items())
[('calc.py', ('f', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')), ('link', ('l', '-'))]
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import secrets
import shlex
import tarfile
from collections.abc import Iterable, Mapping
from typing import Any

from collimate_rl.errors import CollimateTaskError

__all__ = [
    "IGNORED_DIRS",
    "MAX_CHANGE_BYTES",
    "Listing",
    "changed_paths",
    "list_files",
    "read_files",
    "snapshot_listing",
    "write_files",
    "write_files_script",
]

#: Folders never part of a change (caches a test run leaves, git's metadata).
IGNORED_DIRS = (".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis")
#: The most bytes of changed files a grade carries (more: the change is refused).
MAX_CHANGE_BYTES = 8 * 1024 * 1024
_ARG_CHUNK = 98304  # base64 characters per exec argument (under the kernel's 128 KiB)

#: path -> (kind, sha256): kind ``f`` (a regular file) or ``l`` (a symbolic link, sha ``-``).
Listing = dict[str, tuple[str, str]]


def _prune() -> str:
    names = " -o ".join(f"-name {shlex.quote(d)}" for d in IGNORED_DIRS)
    return f"\\( -type d \\( {names} \\) \\) -prune"


_LINKS = "@@COLLIMATE_LINKS@@"


def _listing_script(workdir: str) -> str:
    return (
        f"cd {shlex.quote(workdir)} || exit 44\n"
        f"find . {_prune()} -o -type f -print0 | xargs -0 -r sha256sum --\n"
        f"echo {_LINKS}\n"
        f"find . {_prune()} -o -type l -print\n"
    )


def _listing_entries(output: str) -> Listing:
    listing: Listing = {}
    files, _, links = output.partition(_LINKS + "\n")
    for line in files.split("\n"):
        digest, sep, path = line.partition("  ")
        if sep and len(digest) == 64 and not digest.startswith("\\"):
            listing[path.removeprefix("./")] = ("f", digest)
    for line in links.split("\n"):
        if line.startswith("./"):
            listing[line[2:]] = ("l", "-")
    return listing


def list_files(box: Any, workdir: str, *, timeout: int = 60) -> Listing:
    """Every file under ``workdir`` (caches and ``.git`` left out) with its sha256.

    Raises:
        CollimateTaskError: ``workdir`` is missing or the listing failed.
    """
    result = box.exec(command=_listing_script(workdir), timeout_seconds=timeout)
    if result.exit_code != 0:
        raise CollimateTaskError(
            f"cannot list the repository at {workdir}: {result.stdout[-300:]}",
            exit_code=result.exit_code,
            output=result.stdout[-2000:],
        )
    return _listing_entries(result.stdout)


def snapshot_listing(files: Mapping[str, bytes]) -> Listing:
    """The listing :func:`list_files` gives of a folder holding exactly ``files``.

    >>> snapshot_listing({"a.py": b"", "pkg/__pycache__/a.pyc": b"x"})
    {'a.py': ('f', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')}
    """
    return {
        path: ("f", hashlib.sha256(data).hexdigest())
        for path, data in files.items()
        if not any(part in IGNORED_DIRS for part in path.split("/")[:-1])
    }


def changed_paths(pristine: Listing, now: Listing) -> list[str]:
    """Paths added, changed or deleted between two listings, sorted."""
    return sorted(p for p in set(pristine) | set(now) if pristine.get(p) != now.get(p))


def read_files(
    box: Any, workdir: str, paths: Iterable[str], *, timeout: int = 60
) -> dict[str, bytes]:
    """The bytes of ``paths`` (regular files under ``workdir``), in one exec.

    Raises:
        CollimateTaskError: a path is missing, the output is malformed, or the files
            exceed :data:`MAX_CHANGE_BYTES`.
    """
    wanted = list(paths)
    if not wanted:
        return {}
    sentinel = f"COLTAR_{secrets.token_hex(12)}"
    names = " ".join(shlex.quote(p) for p in wanted)
    script = (
        f"cd {shlex.quote(workdir)} || exit 44\n"
        f"printf '\\n%s\\n' {sentinel}\n"
        f"tar -cf - -- {names} | base64 | tr -d '\\n' || exit 45\n"
        f"printf '\\n%s\\n' {sentinel}\n"
    )
    result = box.exec(command=script, timeout_seconds=timeout)
    parts = result.stdout.split(f"\n{sentinel}\n")
    if result.exit_code != 0 or len(parts) != 3:
        raise CollimateTaskError(
            f"cannot read {len(wanted)} files from {workdir} (exit {result.exit_code})",
            exit_code=result.exit_code,
            output=result.stdout[-2000:],
        )
    try:
        raw = base64.b64decode(parts[1].strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CollimateTaskError(f"malformed file payload from {workdir}: {exc}") from None
    if len(raw) > MAX_CHANGE_BYTES * 2:
        raise CollimateTaskError("the files exceed the size a grade carries")
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as archive:
        for member in archive.getmembers():
            if member.isfile():
                handle = archive.extractfile(member)
                files[member.name] = handle.read() if handle is not None else b""
    return files


def _tar_bytes(files: Mapping[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(files):
            data = files[path]
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o755 if data.startswith(b"#!") else 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write_files_script(
    workdir: str, files: Mapping[str, bytes | None], *, staging: str = "/tmp/.colrepo.b64"
) -> list[str]:
    """Shell scripts (one per exec, in order) that write ``files`` under ``workdir``.

    ``None`` deletes the path. Small payloads take one script; larger ones are staged
    in chunks and extracted by the last.
    """
    q = shlex.quote
    writes = {p: d for p, d in files.items() if d is not None}
    deletes = [p for p, d in files.items() if d is None]
    head = f"mkdir -p {q(workdir)} && cd {q(workdir)} || exit 45\n"
    tail = ""
    if deletes:
        tail += "rm -f -- " + " ".join(q(p) for p in sorted(deletes)) + " || exit 45\n"
    if not writes:
        return [head + tail]
    encoded = base64.b64encode(_tar_bytes(writes)).decode("ascii")
    if len(encoded) <= _ARG_CHUNK:
        return [
            head
            + f"printf %s {q(encoded)} | base64 -d | tar -xf - --no-same-owner || exit 45\n"
            + tail
        ]
    chunks = [encoded[i : i + _ARG_CHUNK] for i in range(0, len(encoded), _ARG_CHUNK)]
    scripts = [f": > {q(staging)} || exit 45\n"]
    scripts += [f"printf %s {q(c)} >> {q(staging)} || exit 45\n" for c in chunks]
    scripts[-1] += (
        head
        + f"base64 -d < {q(staging)} | tar -xf - --no-same-owner || exit 45\nrm -f {q(staging)}\n"
        + tail
    )
    return scripts


_SESSION_DIR = "/sandbox/"


def as_exec_files(
    workdir: str, files: Mapping[str, bytes | None], *, plain_only: bool = False
) -> list[dict[str, str]] | None:
    """``files`` as an exec's ``files`` (text, relative to the session's folder), if they can be.

    ``plain_only``: only if every file is *plain text*, which any transport writes exactly
    (UTF-8 that ends with a newline, without NUL or CR: the daemon contract's text write may
    add a final newline, nothing else).

    >>> as_exec_files("/sandbox/repo", {"a.py": b"x = 1\\n"}, plain_only=True)
    [{'path': 'repo/a.py', 'content': 'x = 1\\n'}]
    >>> as_exec_files("/sandbox/repo", {"a.py": b"x = 1"}, plain_only=True) is None
    True
    """
    if not workdir.startswith(_SESSION_DIR) or any(d is None for d in files.values()):
        return None
    prefix = workdir[len(_SESSION_DIR) :].strip("/")
    out = []
    for path, data in files.items():
        try:
            text = (data or b"").decode("utf-8")
        except UnicodeDecodeError:
            return None
        if "\n" in path or (plain_only and not _plain(text)):
            return None
        out.append({"path": f"{prefix}/{path}" if prefix else path, "content": text})
    return out


def _plain(text: str) -> bool:
    return text.endswith("\n") and "\x00" not in text and "\r" not in text


def write_files(
    box: Any, workdir: str, files: Mapping[str, bytes | None], *, timeout: int = 60
) -> None:
    """Write (and delete) ``files`` under ``workdir`` in the sandbox, byte-exact.

    Text files under the session's folder ride on one exec's ``files`` (the node writes
    them): plain text as it is (see :func:`as_exec_files`), other UTF-8 with every sha256
    checked in that exec (``sha256sum -c``; a mismatch falls back); anything else (binary
    files, deletions, other folders) goes as a base64 tar.

    Raises:
        CollimateTaskError: a step failed in the sandbox.
    """
    plain = as_exec_files(workdir, files, plain_only=True)
    if plain and box.exec(command=":", files=plain, timeout_seconds=timeout).exit_code == 0:
        return
    as_files = None if plain else as_exec_files(workdir, files)
    if as_files:
        sums = " ".join(
            shlex.quote(f"{hashlib.sha256(d or b'').hexdigest()}  {p}") for p, d in files.items()
        )
        check = f"cd {shlex.quote(workdir)} && printf '%s\\n' {sums} | sha256sum -c --status -"
        if box.exec(command=check, files=as_files, timeout_seconds=timeout).exit_code == 0:
            return
    for script in write_files_script(workdir, files):
        result = box.exec(command=script, timeout_seconds=timeout)
        if result.exit_code != 0:
            raise CollimateTaskError(
                f"cannot write files under {workdir}: {result.stdout[-300:]}",
                exit_code=result.exit_code,
                output=result.stdout[-2000:],
            )
