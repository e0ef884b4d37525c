"""Unified diffs, host-side: read git/GNU patches, apply them strictly, write them back.

A *changeset* maps a repository path to its new bytes, or to ``None`` for a deleted
file. The grader works with changesets (whole files, byte-exact); diffs are how rows
carry their gold and test patches and how ``info`` shows an agent's changes.

>>> old = {"calc.py": b"def add(a, b):\\n    return a - b\\n"}
>>> patch = make_patch(old, {"calc.py": b"def add(a, b):\\n    return a + b\\n"})
>>> print(patch)
diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
<BLANKLINE>
>>> apply_patch(old, patch)
{'calc.py': b'def add(a, b):\\n    return a + b\\n'}
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "Changeset",
    "FilePatch",
    "PatchError",
    "apply_patch",
    "make_patch",
    "parse_patch",
    "patch_paths",
]

#: path -> new content, or ``None`` when the file is deleted.
Changeset = dict[str, "bytes | None"]

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = b"\\ No newline at end of file"


class PatchError(ValueError):
    """A patch that cannot be read, or does not apply to the files it names."""


@dataclass
class FilePatch:
    """One file's part of a patch: ``old_path``/``new_path`` are ``None`` for a created/deleted file."""

    old_path: str | None
    new_path: str | None
    hunks: list[tuple[int, list[bytes]]] = field(default_factory=list)
    binary: bool = False

    @property
    def path(self) -> str:
        """The path the change lands on (the old one for a deletion)."""
        return self.new_path or self.old_path or ""


def _strip_prefix(raw: bytes) -> str | None:
    name = raw.split(b"\t", 1)[0].strip()
    if name == b"/dev/null":
        return None
    text = name.decode("utf-8", "surrogateescape")
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    if text[:2] in ("a/", "b/"):
        text = text[2:]
    return text


def parse_patch(text: str | bytes) -> list[FilePatch]:
    """The files of a unified diff (git's or GNU's), in order.

    Raises:
        PatchError: a hunk outside a file, or a hunk whose line counts do not match.
    """
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    lines = data.split(b"\n")
    files: list[FilePatch] = []
    current: FilePatch | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(b"diff --git "):
            parts = line[len(b"diff --git ") :].split(b" b/", 1)
            old = _strip_prefix(parts[0])
            new = _strip_prefix(b"b/" + parts[1]) if len(parts) == 2 else old
            current = FilePatch(old, new)
            files.append(current)
        elif line.startswith(b"new file mode") and current is not None:
            current.old_path = None
        elif line.startswith(b"deleted file mode") and current is not None:
            current.new_path = None
        elif line.startswith(b"rename from ") and current is not None:
            current.old_path = _strip_prefix(b"a/" + line[len(b"rename from ") :])
        elif line.startswith(b"rename to ") and current is not None:
            current.new_path = _strip_prefix(b"b/" + line[len(b"rename to ") :])
        elif line.startswith((b"Binary files ", b"GIT binary patch")) and current is not None:
            current.binary = True
        elif line.startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ "):
            old, new = _strip_prefix(line[4:]), _strip_prefix(lines[i + 1][4:])
            if current is None or current.hunks or (current.path not in (old, new)):
                current = FilePatch(old, new)
                files.append(current)
            else:
                current.old_path, current.new_path = old, new
            i += 1
        elif line.startswith(b"@@"):
            if current is None:
                raise PatchError(f"line {i + 1}: a hunk before any file header")
            i = _read_hunk(lines, i, current)
            continue
        i += 1
    return files


def _read_hunk(lines: list[bytes], i: int, target: FilePatch) -> int:
    match = _HUNK.match(lines[i])
    if match is None:
        raise PatchError(f"line {i + 1}: malformed hunk header {lines[i][:80]!r}")
    old_count = int(match.group(2)) if match.group(2) is not None else 1
    new_count = int(match.group(4)) if match.group(4) is not None else 1
    body: list[bytes] = []
    seen_old = seen_new = 0
    i += 1
    while i < len(lines) and (seen_old < old_count or seen_new < new_count):
        line = lines[i]
        tag = line[:1]
        if tag == b" " or (line == b"" and i + 1 < len(lines)):
            body.append(b" " + line[1:])
            seen_old += 1
            seen_new += 1
        elif tag == b"-":
            body.append(line)
            seen_old += 1
        elif tag == b"+":
            body.append(line)
            seen_new += 1
        elif line.startswith(b"\\"):
            body.append(_NO_NEWLINE)
        else:
            break
        i += 1
    if i < len(lines) and lines[i].startswith(b"\\"):
        body.append(_NO_NEWLINE)
        i += 1
    if seen_old != old_count or seen_new != new_count:
        raise PatchError(
            f"hunk of {target.path!r} claims -{old_count} +{new_count} lines, has "
            f"-{seen_old} +{seen_new}"
        )
    target.hunks.append((int(match.group(1)), body))
    return i


def _sides(body: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """The hunk's old and new lines, each with its line ending (none after a marker)."""
    old: list[bytes] = []
    new: list[bytes] = []
    last: list[list[bytes]] = []
    for line in body:
        if line == _NO_NEWLINE:
            for side in last:
                side[-1] = side[-1].removesuffix(b"\n")
            continue
        tag, text = line[:1], line[1:] + b"\n"
        last = []
        if tag in (b" ", b"-"):
            old.append(text)
            last.append(old)
        if tag in (b" ", b"+"):
            new.append(text)
            last.append(new)
    return old, new


def _apply_hunks(path: str, content: bytes, hunks: list[tuple[int, list[bytes]]]) -> bytes:
    lines = content.splitlines(keepends=True)
    out: list[bytes] = []
    cursor = 0
    for start, body in hunks:
        old, new = _sides(body)
        want = max(start - 1, 0) if old else start
        at = _find(lines, old, want, cursor)
        if at is None:
            raise PatchError(f"a hunk of {path!r} (at line {start}) does not apply")
        out += lines[cursor:at]
        out += new
        cursor = at + len(old)
    out += lines[cursor:]
    return b"".join(out)


def _find(lines: list[bytes], old: list[bytes], want: int, floor: int) -> int | None:
    """Where ``old`` sits in ``lines``: at ``want``, else the nearest offset (never before ``floor``)."""
    n = len(old)
    for delta in range(len(lines) + 1):
        for at in (want - delta, want + delta) if delta else (want,):
            if floor <= at <= len(lines) - n and lines[at : at + n] == old:
                return at
    return None


def apply_patch(files: Mapping[str, bytes], patch: str | bytes) -> Changeset:
    """The changeset that ``patch`` makes to ``files`` (the pristine contents it needs).

    Raises:
        PatchError: a hunk that does not apply, a file it modifies that ``files`` lacks,
            a created file that exists, or a binary patch.
    """
    changes: Changeset = {}
    current = dict(files)
    for item in parse_patch(patch):
        if item.binary:
            raise PatchError(f"binary patches are not supported ({item.path!r})")
        if item.old_path is None:
            if current.get(item.path) is not None:
                raise PatchError(f"the patch creates {item.path!r}, which exists")
            base = b""
        else:
            found = current.get(item.old_path)
            if found is None:
                raise PatchError(f"the patch changes {item.old_path!r}, which does not exist")
            base = found
        result = _apply_hunks(item.path, base, item.hunks)
        if item.old_path is not None and item.old_path != item.new_path:
            changes[item.old_path] = current[item.old_path] = None  # type: ignore[assignment]
        if item.new_path is not None:
            changes[item.new_path] = current[item.new_path] = result
    return changes


def patch_paths(patch: str | bytes) -> list[str]:
    """Every path a patch touches (both sides of a rename)."""
    paths: list[str] = []
    for item in parse_patch(patch):
        for path in (item.old_path, item.new_path):
            if path is not None and path not in paths:
                paths.append(path)
    return paths


def make_patch(old: Mapping[str, bytes | None], new: Mapping[str, bytes | None]) -> str:
    """A git-style unified diff from ``old`` to ``new`` (text files; binary ones named only)."""
    chunks: list[str] = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        header = f"diff --git a/{path} b/{path}\n"
        if before is None:
            header += "new file mode 100644\n"
        elif after is None:
            header += "deleted file mode 100644\n"
        try:
            a = (before or b"").decode("utf-8")
            b = (after or b"").decode("utf-8")
        except UnicodeDecodeError:
            chunks.append(header + f"Binary files a/{path} and b/{path} differ\n")
            continue
        body = "".join(
            _mark_eof(line)
            for line in difflib.unified_diff(
                a.splitlines(keepends=True),
                b.splitlines(keepends=True),
                "/dev/null" if before is None else f"a/{path}",
                "/dev/null" if after is None else f"b/{path}",
                lineterm="\n",
            )
        )
        chunks.append(header + body)
    return "".join(chunks)


def _mark_eof(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
