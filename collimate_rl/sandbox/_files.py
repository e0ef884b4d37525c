"""Byte-exact file transfer over exec alone: base64 through ``sh``, framed and verified.

``exec(files=...)`` is not byte-exact everywhere (the real daemon writes files
as text through a heredoc and may append a newline), so uploads and downloads
run as plain shell commands that work on any transport. Each protocol is a
*script flow*: a generator that yields a shell script, receives the
:class:`~collimate_rl.sandbox.ExecResult` of running it, and finally returns
its value. The sandbox drives it (sync or async).

Upload (``upload_flow``), one exec per base64 chunk of at most
:data:`UPLOAD_CHUNK_CHARS` characters (so one ``sh -c`` argument stays well
under the kernel's 128 KiB ``MAX_ARG_STRLEN``):

1. the first script makes the parent directory and creates the temp file
   ``<path>.colup_<16 hex>`` next to the target;
2. every script appends its chunk with ``printf %s '<b64>' | base64 -d``;
3. the last script checks the temp file's size and sha256 against the
   client's, refuses a directory target, ``mv -f``'s the temp over the target
   and prints ``<S> ok <size> <sha256>`` framed by a per-call random sentinel.

Any failure removes the temp file (in the script, and once more best-effort
from the client), so a failed upload never leaves a truncated target.

Download (``download_flow``), one exec per :data:`DOWNLOAD_MAX_BYTES` of file:
the first script prints ``<S> <size> <sha256>``, one line of base64 and
``<S>``; later scripts print ``<S> <size> -`` and the next block range
(POSIX ``dd``). The client accepts exactly one open and one close frame with
exactly one payload line between them, decodes with
``b64decode(validate=True)``, checks every chunk's length and finally the
size and sha256 of the whole. Any violation raises
:class:`~collimate_rl.errors.CollimateTaskError`: corruption never returns
wrong bytes.

Guest exit codes: 44 no such (regular) file, 45 a tool failed (``mkdir``,
``wc``, sha256, ``base64``, a write), 46 verification failed (size, sha256,
a directory target, ``mv``), 47 the file exceeds the caller's ``max_bytes``.
The guest needs ``sh``, ``printf``, ``base64``, ``wc``, ``tr``, ``dd``,
``mkdir``, ``mv``, ``rm`` and one of ``sha256sum`` / ``shasum`` / ``python3``.

>>> flow = upload_flow("out/a.bin", b"\\x00hi")
>>> script = next(flow)
>>> "base64 -d" in script and "mv -f" in script
True
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import posixpath
import re
import secrets
import shlex
from collections.abc import Generator
from typing import Final, TypeVar

from collimate_rl.errors import CollimateTaskError, CollimateUsageError
from collimate_rl.sandbox._result import ExecResult

__all__ = [
    "DOWNLOAD_MAX_BYTES",
    "EXIT_NO_SUCH_FILE",
    "EXIT_TOOL_FAILED",
    "EXIT_TOO_LARGE",
    "EXIT_VERIFY_FAILED",
    "UPLOAD_CHUNK_CHARS",
    "ScriptFlow",
    "download_flow",
    "upload_flow",
]

T = TypeVar("T")

#: A script flow: yields shell scripts, receives their results, returns ``T``.
ScriptFlow = Generator[str, ExecResult, T]

#: Base64 characters per upload exec (96 KiB, a multiple of 4).
UPLOAD_CHUNK_CHARS: Final = 98304
#: File bytes per download exec (11 MiB): its base64 (~14.7 MiB) fits the 16 MiB output cap.
DOWNLOAD_MAX_BYTES: Final = 11534336
_DD_BLOCK: Final = 65536  # DOWNLOAD_MAX_BYTES is a whole number of these

EXIT_NO_SUCH_FILE: Final = 44
EXIT_TOOL_FAILED: Final = 45
EXIT_VERIFY_FAILED: Final = 46
EXIT_TOO_LARGE: Final = 47

_TRANSCRIPT_MAX: Final = 65536
_SHA_RE: Final = re.compile(r"[0-9a-f]{64}")
_SIZE_RE: Final = re.compile(r"0|[1-9][0-9]*")

# Shell helpers shared by every script (globbing off). ``fail`` prints why,
# removes the temp file (``$t``, if set) and exits with the given code. User
# text (paths) only ever enters a script single-quoted, as a variable's value.
_PRELUDE: Final = r"""set -f
fail() { _c=$1; shift; printf '%s\n' "$*"; [ -n "${t:-}" ] && rm -f -- "$t"; exit "$_c"; }
_sha() {
  if command -v sha256sum >/dev/null 2>&1; then set -- $(sha256sum)
  elif command -v shasum >/dev/null 2>&1; then set -- $(shasum -a 256)
  elif command -v python3 >/dev/null 2>&1; then
    set -- $(python3 -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
  else return 1; fi
  [ -n "${1:-}" ] || return 1
  printf '%s' "$1"
}
_size() { _n=$(wc -c < "$1") || return 1; printf '%s' "$_n" | tr -d ' \t'; }"""


def _check_path(path: object) -> str:
    if not isinstance(path, str) or not path or "\x00" in path or "\n" in path:
        raise CollimateUsageError(
            f"path must be a non-empty string without NUL or newline, got {path!r}"
        )
    if path.endswith("/"):
        raise CollimateUsageError(f"path must name a file, not a directory: {path!r}")
    return path


def _sentinel(kind: str) -> str:
    return f"COL{kind}_{secrets.token_hex(16)}"


def _transcript(output: str) -> str:
    if len(output) <= _TRANSCRIPT_MAX:
        return output
    half = _TRANSCRIPT_MAX // 2
    return (
        f"{output[:half]}\n... [{len(output) - _TRANSCRIPT_MAX} chars elided] ...\n{output[-half:]}"
    )


def _task_error(what: str, result: ExecResult) -> CollimateTaskError:
    tail = result.stdout.strip().splitlines()[-1:] if result.stdout.strip() else []
    detail = f": {tail[0][:300]}" if tail else ""
    return CollimateTaskError(
        f"{what} (exit {result.exit_code}){detail}",
        exit_code=result.exit_code,
        output=_transcript(result.stdout),
    )


def _frame(result: ExecResult, sentinel: str, what: str) -> tuple[list[str], str]:
    """Strictly parse ``<S> fields...`` / one payload line / ``<S>`` out of an exec's output."""
    lines = result.stdout.split("\n")
    opens = [i for i, line in enumerate(lines) if line.startswith(sentinel + " ")]
    closes = [i for i, line in enumerate(lines) if line == sentinel]
    if len(opens) != 1 or len(closes) != 1 or closes[0] != opens[0] + 2:
        raise _task_error(f"{what}: malformed output frame", result)
    fields = lines[opens[0]][len(sentinel) + 1 :].split(" ")
    return fields, lines[opens[0] + 1]


def _b64decode(payload: str, result: ExecResult, what: str) -> bytes:
    try:
        return base64.b64decode(payload.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise _task_error(f"{what}: payload is not valid base64", result) from None


# ------------------------------------------------------------------- upload


def _upload_script(
    *,
    index: int,
    count: int,
    path: str,
    tmp: str,
    chunk: str,
    size: int,
    sha: str,
    sentinel: str,
) -> str:
    lines = [_PRELUDE, f"p={shlex.quote(path)}", f"t={shlex.quote(tmp)}"]
    if index == 0:
        parent = posixpath.dirname(path)
        if parent:
            # The message names $d: user text never lands inside double quotes.
            lines.append(f"d={shlex.quote(parent)}")
            lines.append(
                f'mkdir -p -- "$d" || fail {EXIT_TOOL_FAILED} "cannot create directory $d"'
            )
        # printf, not the special builtin ``:``: a failed redirection of a special
        # builtin exits a POSIX shell before ``|| fail`` could run.
        lines.append(f'printf "" > "$t" || fail {EXIT_TOOL_FAILED} "cannot create temp file $t"')
    if chunk:
        lines.append(
            f'printf %s {shlex.quote(chunk)} | base64 -d >> "$t" || fail {EXIT_TOOL_FAILED} '
            f'"writing chunk {index + 1}/{count} to $t failed (disk full?)"'
        )
    if index == count - 1:
        lines += [
            f'[ -f "$t" ] || fail {EXIT_VERIFY_FAILED} "temp file $t vanished"',
            f'n=$(_size "$t") || fail {EXIT_TOOL_FAILED} "wc failed on $t"',
            f'[ "$n" = "{size}" ] || fail {EXIT_VERIFY_FAILED} "size mismatch: wrote $n of {size} bytes (disk full?)"',
            f'h=$(_sha < "$t") || fail {EXIT_TOOL_FAILED} "no sha256 tool (need sha256sum, shasum or python3)"',
            f'[ "$h" = "{sha}" ] || fail {EXIT_VERIFY_FAILED} "sha256 mismatch: got $h"',
            f'[ -d "$p" ] && fail {EXIT_VERIFY_FAILED} "target $p is a directory"',
            f'mv -f -- "$t" "$p" || fail {EXIT_VERIFY_FAILED} "cannot move $t to $p"',
            f'printf \'\\n%s ok %s %s\\n\' {sentinel} "$n" "$h"',
        ]
    return "\n".join(lines) + "\n"


def upload_flow(
    path: str, data: bytes | bytearray | memoryview, *, chunk_chars: int = UPLOAD_CHUNK_CHARS
) -> ScriptFlow[None]:
    """The upload protocol: write ``data`` to ``path`` in the sandbox, byte-exact.

    Args:
        path: the target path in the sandbox (relative to the exec's cwd or absolute).
        data: the bytes to write.
        chunk_chars: base64 characters per exec; a positive multiple of 4.

    Raises:
        TypeError: ``data`` is not bytes, bytearray or memoryview.
        CollimateUsageError: a bad path or chunk size.
        CollimateTaskError: a step failed in the sandbox (the target is untouched).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, bytearray or memoryview, not {type(data).__name__}")
    path = _check_path(path)
    if chunk_chars <= 0 or chunk_chars % 4:
        raise CollimateUsageError(
            f"chunk_chars must be a positive multiple of 4, got {chunk_chars}"
        )
    return _upload(path, bytes(data), chunk_chars)


def _upload(path: str, raw: bytes, chunk_chars: int) -> ScriptFlow[None]:
    encoded = base64.b64encode(raw).decode("ascii")
    chunks = [encoded[i : i + chunk_chars] for i in range(0, len(encoded), chunk_chars)] or [""]
    size, sha = len(raw), hashlib.sha256(raw).hexdigest()
    tmp = f"{path}.colup_{secrets.token_hex(8)}"
    sentinel = _sentinel("UP")
    started = False
    try:
        for index, chunk in enumerate(chunks):
            script = _upload_script(
                index=index,
                count=len(chunks),
                path=path,
                tmp=tmp,
                chunk=chunk,
                size=size,
                sha=sha,
                sentinel=sentinel,
            )
            started = True
            result = yield script
            if not result.ok:
                raise _task_error(
                    f"upload to {path!r} failed at step {index + 1}/{len(chunks)}", result
                )
            if index == len(chunks) - 1:
                _check_confirmation(result, sentinel, [str(size), sha], f"upload to {path!r}")
    except Exception:
        if started:
            # Best effort: the first error is the one that matters.
            with contextlib.suppress(Exception):
                yield f"rm -f -- {shlex.quote(tmp)}\n"
        raise


def _check_confirmation(result: ExecResult, sentinel: str, expected: list[str], what: str) -> None:
    lines = result.stdout.split("\n")
    oks = [line for line in lines if line.startswith(sentinel + " ")]
    if len(oks) != 1 or any(line == sentinel for line in lines):
        raise _task_error(f"{what}: missing or repeated confirmation frame", result)
    fields = oks[0][len(sentinel) + 1 :].split(" ")
    if fields != ["ok", *expected]:
        raise _task_error(f"{what}: the sandbox confirmed {fields}, expected ok {expected}", result)


# ----------------------------------------------------------------- download


def _download_script(
    *, path: str, sentinel: str, first: bool, skip_blocks: int, max_bytes: int | None
) -> str:
    blocks = DOWNLOAD_MAX_BYTES // _DD_BLOCK
    lines = [
        _PRELUDE,
        f"p={shlex.quote(path)}",
        f'[ -f "$p" ] || fail {EXIT_NO_SUCH_FILE} "no such file: $p"',
        f'n=$(_size "$p") || fail {EXIT_TOOL_FAILED} "wc failed on $p"',
    ]
    if first:
        if max_bytes is not None:
            lines.append(
                f'[ "$n" -le {max_bytes} ] || fail {EXIT_TOO_LARGE} "file is $n bytes, over the {max_bytes}-byte limit"'
            )
        lines += [
            f'h=$(_sha < "$p") || fail {EXIT_TOOL_FAILED} "no sha256 tool (need sha256sum, shasum or python3)"',
            f'printf \'\\n%s %s %s\\n\' {sentinel} "$n" "$h"',
        ]
    else:
        lines.append(f"printf '\\n%s %s -\\n' {sentinel} \"$n\"")
    lines += [
        f'dd if="$p" bs={_DD_BLOCK} skip={skip_blocks} count={blocks} 2>/dev/null | base64 | tr -d "\\n"',
        f"printf '\\n%s\\n' {sentinel}",
    ]
    return "\n".join(lines) + "\n"


def download_flow(path: str, *, max_bytes: int | None = None) -> ScriptFlow[bytes]:
    """The download protocol: read ``path`` from the sandbox, byte-exact.

    Files over :data:`DOWNLOAD_MAX_BYTES` take one exec per 11 MiB.

    Args:
        path: the file in the sandbox.
        max_bytes: refuse (exit 47) files larger than this; ``None``: no limit.

    Raises:
        CollimateTaskError: no such file, a tool failed, a malformed frame, or
            bytes that do not match the sandbox's size and sha256.
    """
    path = _check_path(path)
    if max_bytes is not None and (
        isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0
    ):
        raise CollimateUsageError(f"max_bytes must be None or an int >= 0, got {max_bytes!r}")
    return _download(path, max_bytes)


def _download(path: str, max_bytes: int | None) -> ScriptFlow[bytes]:
    what = f"download of {path!r}"
    sentinel = _sentinel("DL")
    result = yield _download_script(
        path=path, sentinel=sentinel, first=True, skip_blocks=0, max_bytes=max_bytes
    )
    if not result.ok:
        raise _task_error(f"{what} failed", result)
    fields, payload = _frame(result, sentinel, what)
    if len(fields) != 2 or not _SIZE_RE.fullmatch(fields[0]) or not _SHA_RE.fullmatch(fields[1]):
        raise _task_error(f"{what}: malformed header {fields}", result)
    size, sha = int(fields[0]), fields[1]
    parts: list[bytes] = []
    offset = 0
    while True:
        chunk = _b64decode(payload, result, what)
        want = min(DOWNLOAD_MAX_BYTES, size - offset)
        if len(chunk) != want:
            raise _task_error(f"{what}: chunk has {len(chunk)} bytes, expected {want}", result)
        parts.append(chunk)
        offset += len(chunk)
        if offset >= size:
            break
        sentinel = _sentinel("DL")
        result = yield _download_script(
            path=path,
            sentinel=sentinel,
            first=False,
            skip_blocks=offset // _DD_BLOCK,
            max_bytes=None,
        )
        if not result.ok:
            raise _task_error(f"{what} failed at byte {offset}", result)
        fields, payload = _frame(result, sentinel, what)
        if fields != [str(size), "-"]:
            raise _task_error(f"{what}: the file changed during the download {fields}", result)
    data = b"".join(parts)
    if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
        raise _task_error(f"{what}: the bytes do not match the sandbox's size and sha256", result)
    return data
