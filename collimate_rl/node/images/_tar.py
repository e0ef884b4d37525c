"""A streaming tar reader for layers: ustar, GNU long names and pax headers, nothing held whole.

Python's ``tarfile`` in stream mode copies its buffer on every small read and
reads metadata members of any size into memory; a layer is untrusted and big,
so the unpacker reads tar itself. One pass, forward only: :meth:`TarReader.entries`
yields each entry's header, and :meth:`TarReader.chunks` streams the current
entry's content (whatever is left unread is skipped before the next header).

Handled: ustar (with its name prefix), GNU ``L``/``K`` long names, pax ``x``
headers (``path``, ``linkpath``, ``size``, ``mtime``, and xattr keys, which are
only reported), pax ``g`` headers (ignored), base-256 numbers. GNU sparse files
(old ``S`` or pax ``GNU.sparse.*``) are refused: no image builder writes them.

>>> import io, tarfile
>>> buf = io.BytesIO()
>>> with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
...     info = tarfile.TarInfo("a/" + "x" * 150); info.size = 3
...     tf.addfile(info, io.BytesIO(b"abc"))
>>> reader = TarReader(io.BytesIO(buf.getvalue()).read)
>>> [(e.name[-3:], e.size, b"".join(reader.chunks())) for e in reader.entries()]
[('xxx', 3, b'abc')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from collimate_rl.node.images.errors import LayerError

__all__ = ["TarEntry", "TarReader"]

BLOCK = 512
REGULAR = b"0"
HARDLINK = b"1"
SYMLINK = b"2"
CHAR = b"3"
BLOCKDEV = b"4"
DIRECTORY = b"5"
FIFO = b"6"
_CONTIGUOUS = b"7"
_PAX = b"x"
_PAX_GLOBAL = b"g"
_GNU_LONGNAME = b"L"
_GNU_LONGLINK = b"K"
_GNU_SPARSE = b"S"
_NO_DATA = (HARDLINK, SYMLINK, CHAR, BLOCKDEV, DIRECTORY, FIFO)
_META_MAX = 1 << 20  # a pax header or long name over 1 MiB is an attack on memory, not a name


@dataclass
class TarEntry:
    """One tar entry's header, after any pax or GNU long-name headers were applied.

    Attributes:
        name: the entry's path as the layer spells it.
        type: the tar type flag (``b"0"`` file, ``b"5"`` directory, ...).
        mode: permission bits, ``0o7777`` at most.
        size: content bytes (files only).
        mtime: modification time, seconds.
        linkname: a link's target.
        devmajor, devminor: a device node's numbers.
        xattrs: names of the extended attributes the entry carries (never applied).
    """

    name: str
    type: bytes
    mode: int
    size: int
    mtime: float
    linkname: str
    devmajor: int
    devminor: int
    xattrs: tuple[str, ...] = ()


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _number(field: bytes) -> int:
    if field and field[0] & 0x80:  # base-256 (GNU): big-endian, first byte's top bit set
        value = int.from_bytes(field, "big", signed=False)
        if field[0] & 0x40:  # negative
            return value - (1 << (8 * len(field)))
        return value & ~(1 << (8 * len(field) - 1))
    digits = field.split(b"\0", 1)[0].strip(b" ")
    if not digits:
        return 0
    try:
        return int(digits, 8)
    except ValueError:
        raise LayerError(f"the layer has a malformed tar number {field!r}") from None


def _checksum_ok(header: bytes) -> bool:
    stored = _number(header[148:156])
    unsigned = sum(header[:148]) + 8 * 32 + sum(header[156:])
    if stored == unsigned:
        return True
    # some old tars summed signed chars
    signed = unsigned - 256 * sum(1 for b in header[:148] + header[156:] if b > 127)
    return stored == signed


def _pax_records(data: bytes) -> dict[str, str]:
    records: dict[str, str] = {}
    pos = 0
    while pos < len(data) and data[pos] != 0:
        space = data.find(b" ", pos)
        if space < 0:
            raise LayerError("the layer has a malformed pax header")
        try:
            length = int(data[pos:space])
        except ValueError:
            raise LayerError("the layer has a malformed pax header") from None
        record = data[space + 1 : pos + length]
        if length <= 0 or not record.endswith(b"\n") or b"=" not in record:
            raise LayerError("the layer has a malformed pax header")
        key, _, value = record[:-1].partition(b"=")
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return records


class TarReader:
    """Reads tar entries from ``read(n)`` (which returns at most ``n`` bytes, ``b""`` at the end).

    Args:
        read: the tar stream's read function (a decompressing, metered one for a layer).
    """

    def __init__(self, read: Callable[[int], bytes | memoryview]) -> None:
        self._read = read
        self._left = 0  # unread content of the current entry
        self._pad = 0  # padding after it

    def _exact(self, n: int) -> bytes:
        parts = []
        while n:
            data = self._read(n)
            if not data:
                raise LayerError("the layer's tar stream ends in the middle of an entry")
            parts.append(data)
            n -= len(data)
        return b"".join(parts)

    def _skip_rest(self) -> None:
        for _ in self.chunks():
            pass
        if self._pad:
            self._exact(self._pad)
            self._pad = 0

    def chunks(self, size: int = 1 << 20) -> Iterator[bytes | memoryview]:
        """The current entry's remaining content, in pieces of at most ``size`` bytes.

        A piece may be a view into the reader's buffer: use it before the next one.
        """
        while self._left:
            data = self._read(min(size, self._left))
            if not data:
                raise LayerError("the layer's tar stream ends in the middle of a file")
            self._left -= len(data)
            yield data

    def _header(self) -> bytes | None:
        first = bytes(self._read(BLOCK))
        if not first:
            return None  # no end-of-archive blocks at all: tolerated, as GNU tar does
        header = first if len(first) == BLOCK else first + self._exact(BLOCK - len(first))
        if header.count(0) == BLOCK:
            return None  # end of archive; what follows (the second zero block) is not read
        if not _checksum_ok(header):
            raise LayerError("the layer has a tar header with a bad checksum (not a tar?)")
        return header

    def _body(self, size: int) -> bytes:
        if size > _META_MAX:
            raise LayerError(f"the layer has a {size}-byte tar metadata entry (over 1 MiB)")
        data = self._exact(size)
        self._exact(-size % BLOCK)
        return data

    def entries(self) -> Iterator[TarEntry]:
        """Each entry in order; read its content with :meth:`chunks` before the next one."""
        pax: dict[str, str] = {}
        long_name = long_link = None
        while True:
            self._skip_rest()
            header = self._header()
            if header is None:
                return
            kind = header[156:157]
            size = _number(header[124:136])
            if size < 0:
                raise LayerError("the layer has a tar entry with a negative size")
            if kind == _PAX:
                pax.update(_pax_records(self._body(size)))
                continue
            if kind == _PAX_GLOBAL:
                self._body(size)
                continue
            if kind in (_GNU_LONGNAME, _GNU_LONGLINK):
                text = _text(self._body(size))
                if kind == _GNU_LONGNAME:
                    long_name = text
                else:
                    long_link = text
                continue
            if kind == _GNU_SPARSE or any(k.startswith("GNU.sparse.") for k in pax):
                raise LayerError("the layer holds a sparse file, which no image builder writes")
            entry = self._entry(header, kind, size, pax, long_name, long_link)
            pax, long_name, long_link = {}, None, None
            # as tarfile does: content follows files and any type it does not know
            self._left = 0 if entry.type in _NO_DATA else entry.size
            self._pad = -self._left % BLOCK
            if entry.type in (_CONTIGUOUS, b"\0"):
                entry.type = REGULAR
            yield entry

    @staticmethod
    def _entry(
        header: bytes,
        kind: bytes,
        size: int,
        pax: dict[str, str],
        long_name: str | None,
        long_link: str | None,
    ) -> TarEntry:
        name = _text(header[0:100])
        if header[257:263] == b"ustar\0" and header[345] != 0:  # POSIX ustar name prefix
            name = _text(header[345:500]) + "/" + name
        name = pax.get("path", long_name if long_name is not None else name)
        link = pax.get("linkpath", long_link if long_link is not None else _text(header[157:257]))
        try:
            size = int(pax["size"]) if "size" in pax else size
            mtime = float(pax["mtime"]) if "mtime" in pax else float(_number(header[136:148]))
        except ValueError:
            raise LayerError(f"the layer's entry {name!r} has a malformed pax number") from None
        xattrs = tuple(k.split("xattr.", 1)[1] for k in pax if "xattr." in k)
        if kind == b"\0" and name.endswith("/"):
            kind = DIRECTORY  # pre-POSIX tar marks directories by the trailing slash
        return TarEntry(
            name=name,
            type=kind,
            mode=_number(header[100:108]) & 0o7777,
            size=size,
            mtime=mtime,
            linkname=link,
            devmajor=_number(header[329:337]),
            devminor=_number(header[337:345]),
            xattrs=xattrs,
        )
