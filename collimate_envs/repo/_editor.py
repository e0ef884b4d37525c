"""``str_replace_editor``: SWE-agent's and OpenHands' file editor, with its logic host-side.

The sandbox only reads and writes bytes (one exec each: base64 both ways, so any byte
survives; plain text is written by the node itself, with the exec's ``files``, and no
process); viewing, replacing, inserting and undoing happen here. A file the editor
read or wrote is remembered until the next ``bash`` call (nothing else changes files
between two calls: the node ends an exec's leftover processes), so an edit after a view
is one exec.

>>> number_lines("a\\nb\\n", 1)
'     1\\ta\\n     2\\tb'
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import shlex
from typing import Any

from collimate_envs.repo._workspace import as_exec_files
from collimate_rl.errors import CollimateTaskError

__all__ = ["Editor", "EditorError", "number_lines"]

_SNIPPET_LINES = 4
_MAX_VIEW_CHARS = 16000


class EditorError(ValueError):
    """An editor command that cannot be done; the message is shown to the agent."""


def number_lines(text: str, first: int) -> str:
    """``cat -n``'s layout, numbering from ``first``."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(lines, start=first))


class Editor:
    """The editor of one sandbox (one agent), rooted at the repository folder."""

    def __init__(self, box: Any, workdir: str, *, timeout: int = 30) -> None:
        self.box = box
        self.workdir = workdir
        self.timeout = timeout
        self.known: dict[str, bytes] = {}
        self.history: dict[str, list[bytes | None]] = {}

    def forget(self) -> None:
        """Drop what the editor remembers of file contents (a ``bash`` call may change anything)."""
        self.known.clear()

    def _path(self, path: str) -> str:
        full = posixpath.normpath(posixpath.join(self.workdir, path))
        return full

    def _exec(self, command: str) -> Any:
        return self.box.exec(command=command, timeout_seconds=self.timeout)

    def _exec_files(self, files: list[dict[str, str]]) -> Any:
        return self.box.exec(command=":", files=files, timeout_seconds=self.timeout)

    def read(self, path: str) -> bytes | None:
        """A file's bytes, or ``None`` if it is not a regular file (missing, a folder)."""
        if path in self.known:
            return self.known[path]
        q = shlex.quote(path)
        result = self._exec(f"[ -f {q} ] || exit 44\nbase64 -w0 -- {q}")
        if result.exit_code == 44:
            return None
        if result.exit_code != 0:
            raise EditorError(f"cannot read {path}: {result.stdout.strip()[-300:]}")
        try:
            data = base64.b64decode(result.stdout.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise CollimateTaskError(f"malformed read of {path} from the sandbox") from None
        self.known[path] = data
        return data

    def write(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` (its folder made if needed)."""
        q = shlex.quote(path)
        plain = as_exec_files("/sandbox/", {path.removeprefix("/sandbox/"): data}, plain_only=True)
        if path.startswith("/sandbox/") and plain:
            # plain text rides on the exec itself: no process in the sandbox at all
            result = self._exec_files(plain)
            if result.exit_code == 0:
                self.known[path] = data
                return
        encoded = base64.b64encode(data).decode("ascii")
        parent = shlex.quote(posixpath.dirname(path) or "/")
        if len(encoded) < 98304:
            write = f"printf %s {shlex.quote(encoded)} | base64 -d > {q}"
            # a file the editor just read exists: no folder to make (one process fewer)
            script = write if path in self.known else f"mkdir -p -- {parent} && {write}"
            result = self._exec(script)
        else:  # large: the SDK's chunked, verified upload
            self.box.upload_bytes(path, data, timeout_seconds=self.timeout)
            result = None
        if result is not None and result.exit_code != 0:
            self.known.pop(path, None)
            raise EditorError(f"cannot write {path}: {result.stdout.strip()[-300:]}")
        self.known[path] = data

    def run(self, args: dict[str, Any]) -> str:
        """Run one editor command; the observation text.

        Raises:
            EditorError: the command cannot be done (shown to the agent).
        """
        command = args["command"]
        path = self._path(args["path"])
        if command == "view":
            return self._view(path, args.get("view_range"))
        if command == "create":
            return self._create(path, args.get("file_text"))
        if command == "str_replace":
            return self._replace(path, args.get("old_str"), args.get("new_str", ""))
        if command == "insert":
            return self._insert(path, args.get("insert_line"), args.get("new_str"))
        return self._undo(path)

    def _text(self, path: str) -> tuple[bytes, str]:
        data = self.read(path)
        if data is None:
            raise EditorError(f"{path} does not exist or is not a file")
        try:
            return data, data.decode("utf-8")
        except UnicodeDecodeError:
            raise EditorError(f"{path} is not UTF-8 text; use bash for binary files") from None

    def _view(self, path: str, view_range: Any) -> str:
        data = self.read(path)
        if data is None:
            q = shlex.quote(path)
            listing = self._exec(
                f"[ -d {q} ] || exit 44\nfind {q} -maxdepth 2 -not -path '*/.*' | sort | head -500"
            )
            if listing.exit_code != 0:
                raise EditorError(f"{path} does not exist")
            return f"Files and folders under {path}, two levels deep:\n{listing.stdout.rstrip()}"
        _, text = self._text(path)
        lines = text.split("\n")
        first, last = 1, len(lines)
        if view_range is not None:
            if (
                not isinstance(view_range, (list, tuple))
                or len(view_range) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in view_range)
            ):
                raise EditorError("view_range must be two integers, [first, last]")
            first, last = int(view_range[0]), int(view_range[1])
            if last == -1:
                last = len(lines)
            if not 1 <= first <= max(len(lines), 1) or last < first:
                raise EditorError(
                    f"view_range {view_range} is outside the file's {len(lines)} lines"
                )
        shown = number_lines("\n".join(lines[first - 1 : last]), first)
        if len(shown) > _MAX_VIEW_CHARS:
            shown = shown[:_MAX_VIEW_CHARS] + "\n[... the file is longer: use view_range ...]"
        return f"Here is {path} (lines {first}-{min(last, len(lines))}):\n{shown}"

    def _create(self, path: str, file_text: Any) -> str:
        if not isinstance(file_text, str):
            raise EditorError('create needs "file_text"')
        exists = self._exec(f"[ -e {shlex.quote(path)} ]").exit_code == 0
        if exists:
            raise EditorError(
                f"{path} already exists; `create` does not overwrite (use str_replace)"
            )
        self.write(path, file_text.encode("utf-8"))
        self.history.setdefault(path, []).append(None)
        return f"Created {path} ({len(file_text)} characters)."

    def _snippet(self, path: str, text: str, line: int, added: int) -> str:
        lines = text.split("\n")
        first = max(1, line - _SNIPPET_LINES)
        last = min(len(lines), line + added + _SNIPPET_LINES)
        shown = number_lines("\n".join(lines[first - 1 : last]), first)
        return f"Edited {path}. Lines {first}-{last} now read:\n{shown}"

    def _replace(self, path: str, old: Any, new: Any) -> str:
        if not isinstance(old, str) or old == "":
            raise EditorError('str_replace needs a non-empty "old_str"')
        if not isinstance(new, str):
            raise EditorError('"new_str" must be text')
        data, text = self._text(path)
        count = text.count(old)
        if count == 0:
            raise EditorError(f"old_str does not occur verbatim in {path}; nothing was changed")
        if count > 1:
            lines = [text[:i].count("\n") + 1 for i in _find_all(text, old)]
            raise EditorError(
                f"old_str occurs {count} times in {path} (lines {lines}); make it unique"
            )
        at = text.index(old)
        updated = text.replace(old, new, 1)
        self.write(path, updated.encode("utf-8"))
        self.history.setdefault(path, []).append(data)
        return self._snippet(path, updated, text[:at].count("\n") + 1, new.count("\n"))

    def _insert(self, path: str, line: Any, new: Any) -> str:
        if not isinstance(line, int) or isinstance(line, bool):
            raise EditorError('insert needs an integer "insert_line"')
        if not isinstance(new, str):
            raise EditorError('insert needs "new_str"')
        data, text = self._text(path)
        lines = text.split("\n")
        count = len(lines) - (1 if text.endswith("\n") else 0)
        if not 0 <= line <= count:
            raise EditorError(f"insert_line {line} is outside 0..{count}")
        block = new if new.endswith("\n") else new + "\n"
        head = "\n".join(lines[:line]) + ("\n" if line else "")
        rest = text[len(head) :] if line else text
        updated = head + block + rest
        self.write(path, updated.encode("utf-8"))
        self.history.setdefault(path, []).append(data)
        return self._snippet(path, updated, line + 1, block.count("\n"))

    def _undo(self, path: str) -> str:
        past = self.history.get(path)
        if not past:
            raise EditorError(f"no edit of {path} to undo")
        previous = past.pop()
        if previous is None:
            self._exec(f"rm -f -- {shlex.quote(path)}")
            self.known.pop(path, None)
            return f"Undid the creation of {path} (removed)."
        self.write(path, previous)
        return f"Undid the last edit of {path}."


def _find_all(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found
