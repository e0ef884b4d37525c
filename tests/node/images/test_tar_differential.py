"""Our streaming tar reader (``images/_tar.py``) against Python's ``tarfile``, on the same bytes.

The unpacker reads layers with a tar reader of its own (``tarfile`` in stream mode copies its
buffer on every small read and holds metadata members whole; see docs/architecture.md,
"Hand-written pieces"). Whatever archive ``tarfile`` writes, in any of its three formats, with
long names and links, and however the stream is cut into reads, both readers must see the
same entries with the same content.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collimate_rl.node.images._tar import DIRECTORY, HARDLINK, REGULAR, SYMLINK, TarReader
from collimate_rl.node.images.errors import LayerError

_TYPES = {tarfile.REGTYPE: REGULAR, tarfile.DIRTYPE: DIRECTORY, tarfile.SYMTYPE: SYMLINK}
_TYPES[tarfile.LNKTYPE] = HARDLINK

segment = st.text(alphabet="abcxyz_-.é", min_size=1, max_size=60).filter(
    lambda s: s not in (".", "..")
)
long_segment = st.text(alphabet="abcxyz", min_size=40, max_size=60)
name = st.one_of(
    st.lists(segment, min_size=1, max_size=6).map("/".join),
    # past ustar's 100 bytes: a name prefix (ustar), a long-name header (GNU), a pax path
    st.lists(long_segment, min_size=2, max_size=5).map("/".join),
)
entry = st.tuples(
    name,
    st.sampled_from(sorted(_TYPES)),
    st.binary(max_size=1500),
    st.integers(min_value=0, max_value=0o7777),
    name,  # a link's target
)


def _archive(entries: list[tuple[str, bytes, bytes, int, str]], fmt: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for path, kind, content, mode, target in entries:
            info = tarfile.TarInfo(path)
            info.type, info.mode, info.mtime = kind, mode, 1_700_000_000
            if kind == tarfile.REGTYPE:
                info.size = len(content)
                tf.addfile(info, io.BytesIO(content))
            else:
                if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                    info.linkname = target
                tf.addfile(info)
    return buf.getvalue()


def _reads(data: bytes, cuts: list[int]) -> Callable[[int], bytes]:
    """``read(n)`` over ``data`` that returns fewer bytes than asked wherever ``cuts`` say."""
    stream = io.BytesIO(data)
    sizes = iter(cuts)

    def read(n: int) -> bytes:
        return stream.read(max(1, min(n, next(sizes, n))))

    return read


def _ours(data: bytes, cuts: list[int]) -> list[tuple[str, bytes, int, str, bytes]]:
    reader = TarReader(_reads(data, cuts))
    return [
        (e.name, e.type, e.mode, e.linkname, b"".join(bytes(c) for c in reader.chunks()))
        for e in reader.entries()
    ]


def _theirs(data: bytes) -> list[tuple[str, bytes, int, str, bytes]]:
    out = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        for member in tf.getmembers():
            handle = tf.extractfile(member) if member.isreg() else None
            content = handle.read() if handle else b""
            out.append((member.name, _TYPES[member.type], member.mode, member.linkname, content))
    return out


@settings(max_examples=150, deadline=None)
@given(
    entries=st.lists(entry, max_size=8),
    fmt=st.sampled_from([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]),
    cuts=st.lists(st.integers(min_value=1, max_value=700), max_size=40),
)
def test_both_readers_see_the_same_entries(
    entries: list[tuple[str, bytes, bytes, int, str]], fmt: int, cuts: list[int]
) -> None:
    try:
        data = _archive(entries, fmt)
    except ValueError:  # a name or link too long, or not encodable, for this format
        return
    theirs = _theirs(data)
    # tarfile strips a directory's trailing slash and normalises nothing else
    ours = [
        (n.rstrip("/") if t == DIRECTORY else n, t, m, lk, c)
        for n, t, m, lk, c in _ours(data, cuts)
    ]
    assert ours == theirs


@pytest.mark.parametrize("keep", [100, 512, 700, 1024 + 200])
def test_a_stream_cut_short_is_a_layer_error(keep: int) -> None:
    data = _archive([("a/file", tarfile.REGTYPE, b"x" * 1500, 0o644, "")], tarfile.PAX_FORMAT)
    with pytest.raises(LayerError):
        _ours(data[:keep], [])
