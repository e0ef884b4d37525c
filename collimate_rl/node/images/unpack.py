"""The confined unpacker: one layer blob into one directory, an overlayfs lower layer.

A layer is input from outside. Whatever it holds, unpacking writes, links and
changes nothing outside the directory it is given:

- names: a leading ``/`` is dropped (tar names are relative to the layer's
  root, as Docker and containerd read them; recorded), ``.`` components are
  dropped, and a name with a ``..`` component is refused. An entry that names
  the root itself may only be a directory (a symlink named ``.`` or ``/`` is
  CVE-2021-29136's shape: refused);
- every path is resolved by the kernel inside the root and through no symlink
  (:mod:`._confined`): a write through a planted link, relative, absolute or
  chained, is refused with :class:`LayerError`; symlinks are created as text
  and never followed;
- hard links only to an earlier file of the same layer, resolved the same way;
- whiteouts: ``.wh.NAME`` becomes an overlay whiteout (a 0:0 character device,
  which an unprivileged user may create since Linux 5.8) and ``.wh..wh..opq``
  the ``user.overlay.opaque`` xattr, the form overlayfs reads when mounted with
  ``userxattr`` (the sandboxes' overlays are); neither is ever made through a
  symlink. Other ``.wh..wh.`` names (AUFS bookkeeping) are skipped;
- ownership and modes: entries belong to whoever unpacks (the tar's owners are
  ignored); setuid and setgid bits and a file's sticky bit are dropped;
  everything is made readable by the sandbox's unprivileged uid (``a+r``, and
  ``a+x`` on directories and on files with any execute bit), and directories
  stay ``u+rwx`` so the store can remove them. An image's content is the
  candidate's environment, not a secret;
- device nodes and fifos are skipped, xattrs (file capabilities included) are
  never applied.

Whatever was changed or skipped is recorded per entry in the :class:`LayerReport`.
File modification times are kept (Python checks ``.pyc`` files against them);
directory times are not.

>>> import gzip, hashlib, io, tarfile, tempfile
>>> buf = io.BytesIO()
>>> with tarfile.open(fileobj=buf, mode="w") as tf:
...     info = tarfile.TarInfo("usr/bin/su"); info.size = 2; info.mode = 0o4755
...     tf.addfile(info, io.BytesIO(b"#!"))
>>> blob = gzip.compress(buf.getvalue())
>>> with tempfile.TemporaryDirectory() as tmp:
...     Path(tmp, "blob").write_bytes(blob)
...     report = unpack_layer_blob(
...         Path(tmp, "blob"), "sha256:" + hashlib.sha256(blob).hexdigest(),
...         GZIP_TYPES[0], Path(tmp, "layer"))
...     oct(Path(tmp, "layer/usr/bin/su").stat().st_mode & 0o7777)
1...
'0o755'
>>> report.neutralised[0].what
'setuid/setgid bits dropped (was 0o4755)'
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from collimate_rl.node.images._confined import ConfinedRoot, remove_tree
from collimate_rl.node.images._layer_stream import (
    GZIP_TYPES,
    PLAIN_TYPES,
    ZSTD_TYPES,
    LayerStream,
    OverBudget,
)
from collimate_rl.node.images._tar import (
    BLOCKDEV,
    CHAR,
    DIRECTORY,
    FIFO,
    HARDLINK,
    REGULAR,
    SYMLINK,
    TarEntry,
    TarReader,
)
from collimate_rl.node.images.errors import LayerError, QuotaExceeded

__all__ = [
    "GZIP_TYPES",
    "PLAIN_TYPES",
    "ZSTD_TYPES",
    "LayerReport",
    "Neutralised",
    "unpack_layer_blob",
]

# errors a layer's own names and links cause (a name too long, too many links to a file)
_LAYER_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.EMLINK, errno.EINVAL, errno.EPERM})
_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"
_HEADER = 512  # each entry costs its tar header in the unpacked-size count
# The record stays small even for a layer of a million absolute names.
_MAX_NOTES = 1000


@dataclass(frozen=True)
class Neutralised:
    """One thing the unpacker changed or left out of a layer.

    Attributes:
        path: the entry's name as the layer spelled it.
        what: what was done, in words ("device node skipped", ...).
    """

    path: str
    what: str


@dataclass(frozen=True)
class LayerReport:
    """What unpacking one layer did.

    Attributes:
        digest: the layer blob's digest.
        unpacked_bytes: bytes written (file content) plus 512 per entry.
        entries: tar entries read.
        neutralised: entries changed or skipped, in tar order (the first 1,000, then one
            ``"..."`` entry if there were more).
    """

    digest: str
    unpacked_bytes: int
    entries: int
    neutralised: tuple[Neutralised, ...]


def unpack_layer_blob(
    blob: Path,
    digest: str,
    media_type: str,
    dest: Path,
    *,
    budget: int | None = None,
    quota: int | None = None,
) -> LayerReport:
    """Unpack the layer ``blob`` into ``dest`` (created here, ``0755``), confined to it.

    On any failure ``dest`` is removed again: a layer is unpacked whole or not at all.

    Args:
        blob: the compressed (or plain) tar.
        digest: the blob's digest; checked while streaming.
        media_type: decides gzip, zstd or plain tar.
        dest: the layer directory to create; must not exist.
        budget: the most unpacked bytes this layer may take (the store's free quota, or the
            disk's free space); a bomb stops while streaming.
        quota: the store's ``max_bytes`` the budget came from, for the error (None when
            the budget is the disk's free space).

    Raises:
        LayerError: an unsafe or malformed layer, an unknown media type.
        DigestMismatch: the blob is not the layer its digest names.
        QuotaExceeded: the layer unpacks to more than ``budget``.
    """
    limit = budget if budget is not None else _free_bytes(dest.parent)
    os.mkdir(dest, 0o700)
    try:
        with open(blob, "rb") as raw, ConfinedRoot(dest) as root:
            stream = LayerStream(raw, media_type, digest, limit=limit)
            writer = _Writer(root, limit)
            try:
                _read_entries(stream, writer)
            except (OverBudget, _WriterOverBudget) as exc:
                _raise_over(int(exc.args[0]), limit, quota, digest)
            except LayerError:
                stream.finish()  # a truncated or changed blob reads as a broken tar: say so
                raise
            finally:
                stream.close()
            stream.finish()
            os.chmod(root.fd, 0o755)
        return LayerReport(digest, writer.written, writer.entries, tuple(writer.neutralised))
    except BaseException:
        parent = os.open(dest.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            remove_tree(parent, dest.name)
        finally:
            os.close(parent)
        raise


def _raise_over(produced: int, limit: int, quota: int | None, digest: str) -> None:
    if quota is not None:
        raise QuotaExceeded(quota - limit + produced, quota)
    raise LayerError(
        f"layer {digest} unpacks to more than the {limit} bytes free on the image store's disk"
    )


def _free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _read_entries(stream: LayerStream, writer: _Writer) -> None:
    reader = TarReader(stream.read)
    for entry in reader.entries():
        writer.apply(entry, reader)


class _WriterOverBudget(Exception):
    pass


def clean_name(name: str) -> tuple[tuple[str, ...], bool]:
    """A tar name as clean components, and whether it was absolute.

    >>> clean_name("./usr//lib/./x")
    (('usr', 'lib', 'x'), False)
    >>> clean_name("/etc/passwd")
    (('etc', 'passwd'), True)
    >>> clean_name("a/../../etc")
    Traceback (most recent call last):
    ...
    collimate_rl.node.images.errors.LayerError: the layer's entry 'a/../../etc' has a '..' component...
    """
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise LayerError(
            f"the layer's entry {name!r} has a '..' component; entries stay inside the layer"
        )
    return parts, name.startswith("/")


class _Writer:
    """Applies tar entries to a confined root, under the layer's policy."""

    def __init__(self, root: ConfinedRoot, limit: int) -> None:
        self.root = root
        self.limit = limit
        self.written = 0
        self.entries = 0
        self.neutralised: list[Neutralised] = []

    def note(self, entry: TarEntry, what: str) -> None:
        if len(self.neutralised) < _MAX_NOTES:
            self.neutralised.append(Neutralised(entry.name, what))
        elif len(self.neutralised) == _MAX_NOTES:
            self.neutralised.append(Neutralised("...", "more entries changed; not listed"))

    def _count(self, n: int) -> None:
        self.written += n
        if self.written > self.limit:
            raise _WriterOverBudget(self.written)

    def apply(self, entry: TarEntry, reader: TarReader) -> None:
        self.entries += 1
        self._count(_HEADER)
        if "\0" in entry.name or "\0" in entry.linkname:
            raise LayerError(f"the layer's entry {entry.name!r} has a NUL byte in a name")
        try:
            self._apply(entry, reader)
        except OSError as exc:
            # what the layer's names cause is the layer's fault; a full disk is not
            if exc.errno in _LAYER_ERRNOS:
                raise LayerError(
                    f"the layer's entry {entry.name!r} cannot be unpacked: {exc.strerror}"
                ) from exc
            raise

    def _apply(self, entry: TarEntry, reader: TarReader) -> None:
        parts, absolute = clean_name(entry.name)
        if absolute:
            self.note(entry, "absolute name taken as relative to the layer root")
        for xattr in entry.xattrs:  # pax SCHILY.xattr.*, LIBARCHIVE.xattr.*
            self.note(entry, f"xattr {xattr} not applied")
        base = parts[-1] if parts else ""
        if base.startswith(_WHITEOUT):
            self._whiteout(entry, parts)
        elif not parts:
            if entry.type != DIRECTORY:
                raise LayerError(
                    f"the layer's entry {entry.name!r} would replace the layer's root with a "
                    "non-directory (the shape of CVE-2021-29136)"
                )
            return  # the root's own mode is the store's (0755)
        elif entry.type == REGULAR:
            self._file(entry, parts, reader)
        elif entry.type == DIRECTORY:
            self.root.mkdir(parts, self._dir_mode(entry))
        elif entry.type == SYMLINK:
            if not entry.linkname:  # symlink(2) refuses one (ENOENT): no image can hold it
                raise LayerError(f"the layer's symlink {entry.name!r} has an empty target")
            self.root.symlink(parts, entry.linkname)
        elif entry.type == HARDLINK:
            target, _ = clean_name(entry.linkname)
            if not target:
                raise LayerError(f"the layer hard-links {entry.name!r} to the layer's root")
            self.root.hardlink(parts, target)
        elif entry.type in (CHAR, BLOCKDEV):
            self.note(entry, f"device node {entry.devmajor}:{entry.devminor} skipped")
        elif entry.type == FIFO:
            self.note(entry, "fifo skipped")
        else:
            self.note(entry, f"entry of tar type {entry.type!r} skipped")

    def _whiteout(self, entry: TarEntry, parts: tuple[str, ...]) -> None:
        base = parts[-1]
        if base == _OPAQUE:
            self.root.make_opaque(parts[:-1])
        elif base.startswith(_WHITEOUT + _WHITEOUT) or base == _WHITEOUT:
            self.note(entry, "AUFS metadata skipped")
        else:
            hidden = base[len(_WHITEOUT) :]
            if hidden in (".", ".."):
                raise LayerError(f"the layer's whiteout {entry.name!r} names {hidden!r}")
            if not self.root.whiteout((*parts[:-1], hidden)):
                self.note(entry, "whiteout of an entry of this same layer ignored")

    def _dir_mode(self, entry: TarEntry) -> int:
        mode = entry.mode & 0o7777
        if mode & 0o6000:
            self.note(entry, f"setuid/setgid bits dropped (was {oct(mode)})")
        return (mode & 0o1777) | 0o755

    def _file(self, entry: TarEntry, parts: tuple[str, ...], reader: TarReader) -> None:
        mode = entry.mode & 0o7777
        if mode & 0o6000:
            self.note(entry, f"setuid/setgid bits dropped (was {oct(mode)})")
        if mode & 0o1000:
            self.note(entry, "sticky bit on a file dropped")
        mode = (mode & 0o777) | 0o444 | (0o111 if mode & 0o111 else 0)
        fd = self.root.create_file(parts, mode)
        try:
            for chunk in reader.chunks():
                self._count(len(chunk))
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            mtime_ns = int(entry.mtime) * 1_000_000_000
            try:
                os.utime(fd, ns=(mtime_ns, mtime_ns))
            except (OverflowError, OSError):
                self.note(entry, f"modification time {entry.mtime!r} not applied")
        finally:
            os.close(fd)
