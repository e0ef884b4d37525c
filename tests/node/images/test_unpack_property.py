"""Random tar entry sequences never write outside the layer's root: they unpack, or end in a
LayerError, and the host directory beside the root is untouched either way."""

from __future__ import annotations

import os
import stat
import tarfile
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collimate_rl.node.images.errors import LayerError
from collimate_rl.node.images.unpack import unpack_layer_blob

from ._layers import device, directory, fifo, file, hardlink, layer_blob, snapshot, symlink

HOST = "@HOST@"  # replaced by the host directory's absolute path
_component = st.sampled_from(["a", "b", "lnk", "..", ".", "", ".wh.a", ".wh..wh..opq", HOST])
_name = st.builds(
    lambda lead, parts: lead + "/".join(parts),
    st.sampled_from(["", "/", "./"]),
    st.lists(_component, min_size=1, max_size=4),
)
_target = st.one_of(
    _name,
    st.sampled_from(["../host", HOST, HOST + "/secret", "/", ".", "a/../..", "../../../.."]),
)


def _entry(kind: str, name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    if kind == "file":
        return file(name, b"pwned")
    if kind == "dir":
        return directory(name)
    if kind == "symlink":
        return symlink(name, target)
    if kind == "hardlink":
        return hardlink(name, target)
    if kind == "device":
        return device(name)
    return fifo(name)


_entries = st.lists(
    st.builds(
        _entry,
        st.sampled_from(["file", "dir", "symlink", "hardlink", "device", "fifo"]),
        _name,
        _target,
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_entries)
def test_random_entries_never_write_outside_the_root(
    entries: list[tuple[tarfile.TarInfo, bytes]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        host = base / "host"
        (host / "a").mkdir(parents=True)
        (host / "secret").write_bytes(b"host")
        for info, _ in entries:
            info.name = info.name.replace(HOST, str(host).lstrip("/"))
            info.linkname = info.linkname.replace(HOST, str(host))
        before = snapshot(host)
        blob = layer_blob(entries, "none")
        layer = base / "layer"
        try:
            unpack_layer_blob(blob.write(base / "blob"), blob.digest, blob.media_type, layer)
        except LayerError:
            assert not layer.exists()
        assert snapshot(host) == before
        assert sorted(os.listdir(base)) in (["blob", "host"], ["blob", "host", "layer"])
        assert os.stat(host / "secret").st_nlink == 1
        if layer.exists():
            for dirpath, dirs, files in os.walk(layer):
                for name in dirs + files:
                    st_ = os.lstat(os.path.join(dirpath, name))
                    # only whiteouts may be devices; nothing setuid, nothing unreadable
                    if stat.S_ISCHR(st_.st_mode):
                        assert st_.st_rdev == 0
                    assert not stat.S_ISBLK(st_.st_mode) and not stat.S_ISFIFO(st_.st_mode)
                    assert not st_.st_mode & 0o6000
