"""The confined unpacker against crafted layers: every attack ends in a typed error or a
neutralised entry, and the host directory beside the layer is never touched."""

from __future__ import annotations

import gzip
import os
import shutil
import stat
import tarfile
from pathlib import Path

import pytest

from collimate_rl.node.images.errors import DigestMismatch, LayerError, QuotaExceeded
from collimate_rl.node.images.unpack import LayerReport, unpack_layer_blob

from ._layers import (
    Blob,
    device,
    directory,
    fifo,
    file,
    hardlink,
    layer_blob,
    raw_blob,
    sha256,
    snapshot,
    symlink,
    tar_bytes,
)


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A directory beside the layer standing for the host: nothing may change in it."""
    h = tmp_path / "host"
    (h / "etc").mkdir(parents=True)
    (h / "secret").write_bytes(b"host secret")
    (h / "etc" / "passwd").write_bytes(b"root:x:0:0")
    return h


def _unpack(tmp_path: Path, blob: Blob, **kw: int) -> tuple[Path, LayerReport]:
    layer = tmp_path / "layer"
    before = snapshot(tmp_path / "host") if (tmp_path / "host").exists() else None
    try:
        report = unpack_layer_blob(
            blob.write(tmp_path / "blob"), blob.digest, blob.media_type, layer, **kw
        )
    except BaseException:
        assert not layer.exists(), "a failed unpack left its directory"
        raise
    finally:
        if before is not None:
            assert snapshot(tmp_path / "host") == before, "the host directory changed"
        assert sorted(os.listdir(tmp_path)) in (
            ["blob", "host", "layer"],
            ["blob", "host"],
            ["blob", "layer"],
            ["blob"],
        )
    return layer, report


def _what(report: LayerReport) -> list[str]:
    return [n.what for n in report.neutralised]


# -- names -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../host/secret", "a/../../host/secret", "./../host/new"])
def test_a_name_with_dotdot_is_refused(tmp_path: Path, host: Path, name: str) -> None:
    with pytest.raises(LayerError, match=r"'\.\.' component"):
        _unpack(tmp_path, layer_blob([file("ok", b"1"), file(name, b"pwned")]))


def test_an_absolute_name_lands_inside_the_layer(tmp_path: Path, host: Path) -> None:
    target = str(host / "secret")
    layer, report = _unpack(tmp_path, layer_blob([file(target, b"inside")]))
    assert (layer / target.lstrip("/")).read_bytes() == b"inside"
    assert _what(report) == ["absolute name taken as relative to the layer root"]


@pytest.mark.parametrize("name", [".", "/", "./", "//."])
def test_a_symlink_named_like_the_root_is_refused(tmp_path: Path, host: Path, name: str) -> None:
    # CVE-2021-29136: the root replaced by a link, later entries written through it
    entries = [symlink(name, str(host)), file("secret", b"pwned")]
    with pytest.raises(LayerError, match="CVE-2021-29136"):
        _unpack(tmp_path, layer_blob(entries))


def test_a_directory_named_like_the_root_is_fine(tmp_path: Path) -> None:
    layer, _ = _unpack(tmp_path, layer_blob([directory("./", 0o700), file("./a", b"a")]))
    assert stat.S_IMODE(layer.stat().st_mode) == 0o755
    assert (layer / "a").read_bytes() == b"a"


# -- symlinks ---------------------------------------------------------------------------


def _link_cases(host: Path) -> dict[str, list[tuple[tarfile.TarInfo, bytes]]]:
    return {
        "relative": [symlink("lnk", "../host"), file("lnk/secret", b"pwned")],
        "absolute": [symlink("lnk", str(host)), file("lnk/secret", b"pwned")],
        "chained": [
            symlink("a", "b"),
            symlink("b", str(host)),
            file("a/secret", b"pwned"),
        ],
        "deep": [
            directory("d"),
            symlink("d/up", "../../host/etc"),
            file("d/up/passwd", b"pwned"),
        ],
        "dir-entry": [symlink("lnk", str(host)), directory("lnk/newdir")],
        "inside-layer": [directory("real"), symlink("lnk", "real"), file("lnk/x", b"x")],
    }


@pytest.mark.parametrize(
    "case", ["relative", "absolute", "chained", "deep", "dir-entry", "inside-layer"]
)
def test_a_write_through_a_symlink_is_refused(tmp_path: Path, host: Path, case: str) -> None:
    with pytest.raises(LayerError, match="through a symlink"):
        _unpack(tmp_path, layer_blob(_link_cases(host)[case]))


def test_a_symlink_is_replaced_not_followed_by_a_later_file(tmp_path: Path, host: Path) -> None:
    # the final component: a later entry of that name replaces the link itself
    entries = [symlink("passwd", str(host / "etc" / "passwd")), file("passwd", b"mine")]
    layer, _ = _unpack(tmp_path, layer_blob(entries))
    assert not (layer / "passwd").is_symlink()
    assert (layer / "passwd").read_bytes() == b"mine"


def test_symlinks_are_kept_as_text(tmp_path: Path, host: Path) -> None:
    entries = [symlink("abs", "/etc/shadow"), symlink("rel", "../../../../etc")]
    layer, _ = _unpack(tmp_path, layer_blob(entries))
    assert os.readlink(layer / "abs") == "/etc/shadow"
    assert os.readlink(layer / "rel") == "../../../../etc"


# -- hard links -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([hardlink("x", "../host/secret")], r"'\.\.' component"),
        ([hardlink("x", "/etc/shadow")], "not an earlier"),
        ([hardlink("x", "HOST/secret")], "not an earlier"),
        ([symlink("lnk", "HOST"), hardlink("x", "lnk/secret")], "through a symlink"),
        ([directory("d"), hardlink("x", "d")], "not an earlier file"),
        ([hardlink("x", "./")], "root"),
    ],
)
def test_a_hardlink_outside_the_layer_is_refused(
    tmp_path: Path, host: Path, entries: list[tuple[tarfile.TarInfo, bytes]], match: str
) -> None:
    for info, _ in entries:
        info.linkname = info.linkname.replace("HOST", str(host))
    with pytest.raises(LayerError, match=match):
        _unpack(tmp_path, layer_blob(entries))
    assert os.stat(host / "secret").st_nlink == 1


def test_a_hardlink_to_an_earlier_entry_shares_its_inode(tmp_path: Path) -> None:
    entries = [file("usr/bin/a", b"same", mode=0o755), hardlink("usr/bin/b", "usr/bin/a")]
    layer, _ = _unpack(tmp_path, layer_blob(entries))
    assert os.stat(layer / "usr/bin/a").st_ino == os.stat(layer / "usr/bin/b").st_ino


# -- whiteouts --------------------------------------------------------------------------


def test_whiteouts_become_overlay_whiteouts_and_the_opaque_xattr(tmp_path: Path) -> None:
    entries = [
        file("etc/.wh.motd"),
        directory("var/cache"),
        file("var/cache/.wh..wh..opq"),
        file("var/cache/kept", b"k"),
        file("usr/.wh..wh.plnk"),
    ]
    layer, report = _unpack(tmp_path, layer_blob(entries))
    st = os.lstat(layer / "etc" / "motd")
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(0, 0)
    assert not (layer / "etc" / ".wh.motd").exists()
    assert os.getxattr(layer / "var" / "cache", "user.overlay.opaque") == b"y"
    assert (layer / "var/cache/kept").read_bytes() == b"k"
    assert _what(report) == ["AUFS metadata skipped"]


def test_a_whiteout_of_an_entry_of_the_same_layer_leaves_it(tmp_path: Path) -> None:
    layer, report = _unpack(tmp_path, layer_blob([file("a", b"mine"), file(".wh.a")]))
    assert (layer / "a").read_bytes() == b"mine"
    assert _what(report) == ["whiteout of an entry of this same layer ignored"]


@pytest.mark.parametrize("whiteout", ["lnk/.wh.secret", "lnk/.wh..wh..opq", "lnk/etc/.wh.passwd"])
def test_a_whiteout_through_a_symlink_is_refused(tmp_path: Path, host: Path, whiteout: str) -> None:
    with pytest.raises(LayerError, match="through a symlink"):
        _unpack(tmp_path, layer_blob([symlink("lnk", str(host)), file(whiteout)]))
    assert (host / "secret").read_bytes() == b"host secret"
    assert "user.overlay.opaque" not in os.listxattr(host)


def test_a_whiteout_of_dot_or_dotdot_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LayerError):
        _unpack(tmp_path, layer_blob([file("d/.wh..."), file("x")]))


# -- ownership, modes, devices, xattrs --------------------------------------------------


def test_devices_fifos_and_special_bits_are_neutralised(tmp_path: Path) -> None:
    entries = [
        device("dev/null"),
        device("dev/sda", tarfile.BLKTYPE, 8, 0),
        fifo("run/pipe"),
        file("usr/bin/su", b"#!", mode=0o4755, uid=0, gid=0),
        file("usr/bin/wall", b"#!", mode=0o2755),
        file("data", b"d", mode=0o1600, uid=12345, gid=54321),
        directory("shared", mode=0o2770),
        directory("tmp", mode=0o1777),
    ]
    layer, report = _unpack(tmp_path, layer_blob(entries))
    assert not (layer / "dev" / "null").exists()
    assert not (layer / "dev" / "sda").exists()
    assert not (layer / "run" / "pipe").exists()
    mode = {p: stat.S_IMODE(os.lstat(layer / p).st_mode) for p in entries_names(entries)[3:]}
    assert mode == {
        "usr/bin/su": 0o755,
        "usr/bin/wall": 0o755,
        "data": 0o644,  # sticky dropped, readable by the sandbox uid
        "shared": 0o775,
        "tmp": 0o1777,
    }
    for p in mode:
        st = os.lstat(layer / p)
        assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid())
    assert _what(report) == [
        "device node 1:3 skipped",
        "device node 8:0 skipped",
        "fifo skipped",
        "setuid/setgid bits dropped (was 0o4755)",
        "setuid/setgid bits dropped (was 0o2755)",
        "sticky bit on a file dropped",
        "setuid/setgid bits dropped (was 0o2770)",
    ]


def entries_names(entries: list[tuple[tarfile.TarInfo, bytes]]) -> list[str]:
    return [info.name for info, _ in entries]


def test_xattrs_and_file_capabilities_are_never_applied(tmp_path: Path) -> None:
    info, data = file("usr/bin/ping", b"\x7fELF", mode=0o755)
    info.pax_headers = {
        "SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00",
        "SCHILY.xattr.user.overlay.opaque": "y",
        "SCHILY.xattr.trusted.overlay.redirect": "/etc",
    }
    layer, report = _unpack(tmp_path, layer_blob([(info, data)]))
    assert os.listxattr(layer / "usr/bin/ping") == []
    assert _what(report) == [
        "xattr security.capability not applied",
        "xattr user.overlay.opaque not applied",
        "xattr trusted.overlay.redirect not applied",
    ]


def test_content_is_readable_by_others_and_keeps_its_other_bits(tmp_path: Path) -> None:
    entries = [
        directory("root", 0o700),
        file("root/key", b"k", mode=0o600),
        file("ro", b"r", mode=0o400),
        file("group-writable", b"g", mode=0o664),
        file("x", b"#!", mode=0o700),
        directory("drop", 0o777),
    ]
    old_umask = os.umask(0o022)  # the bits a umask would take are put back
    try:
        layer, _ = _unpack(tmp_path, layer_blob(entries))
    finally:
        os.umask(old_umask)
    modes = {p: stat.S_IMODE(os.lstat(layer / p).st_mode) for p in entries_names(entries)}
    assert modes == {
        "root": 0o755,
        "root/key": 0o644,
        "ro": 0o444,
        "group-writable": 0o664,
        "x": 0o755,
        "drop": 0o777,
    }
    assert (layer / "ro").read_bytes() == b"r"


def test_modification_times_are_kept(tmp_path: Path) -> None:
    layer, _ = _unpack(tmp_path, layer_blob([file("m.py", b"x")]))
    assert os.stat(layer / "m.py").st_mtime == 1_700_000_000


# -- blobs: digest, truncation, compression, bombs ---------------------------------------


@pytest.mark.parametrize("compression", ["gzip", "docker", "zstd", "none"])
def test_every_media_type_unpacks(tmp_path: Path, compression: str) -> None:
    layer, report = _unpack(tmp_path, layer_blob([file("a/b", b"hello")], compression))
    assert (layer / "a/b").read_bytes() == b"hello"
    assert report.entries == 1


def test_an_unknown_media_type_is_refused(tmp_path: Path) -> None:
    blob = layer_blob([file("a")])
    with pytest.raises(LayerError, match="media type"):
        _unpack(tmp_path, Blob(blob.data, blob.digest, "application/x-bzip2"))


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_a_layer_whose_digest_does_not_match_is_refused(tmp_path: Path, compression: str) -> None:
    blob = layer_blob([file("a", b"real")], compression)
    other = sha256(b"something else")
    with pytest.raises(DigestMismatch) as err:
        _unpack(tmp_path, Blob(blob.data, other, blob.media_type))
    assert err.value.actual == blob.digest


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_a_truncated_blob_is_refused(tmp_path: Path, compression: str) -> None:
    blob = layer_blob([file("big", os.urandom(300_000))], compression)
    cut = Blob(blob.data[: len(blob.data) // 2], blob.digest, blob.media_type)
    with pytest.raises(DigestMismatch):
        _unpack(tmp_path, cut)
    # and one whose digest names the truncated bytes: a broken tar, said so
    honest = Blob(cut.data, sha256(cut.data), blob.media_type)
    with pytest.raises(LayerError, match="ends"):
        _unpack(tmp_path, honest)


def test_garbage_is_not_a_tar(tmp_path: Path) -> None:
    with pytest.raises(LayerError):
        _unpack(tmp_path, raw_blob(b"\x01" * 4096, "gzip"))


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_a_decompression_bomb_stops_while_streaming(tmp_path: Path, compression: str) -> None:
    # 256 MiB of zeros compress to well under 1 MiB; the budget is 4 MiB
    size = 256 << 20
    info = tarfile.TarInfo("bomb")
    info.size = size
    header = info.tobuf(tarfile.PAX_FORMAT)
    zeros = bytes(1 << 20)
    if compression == "gzip":
        import zlib

        comp = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        parts = [comp.compress(header)] + [comp.compress(zeros) for _ in range(size >> 20)]
        data = b"".join([*parts, comp.compress(bytes(1024)), comp.flush()])
        media = "application/vnd.oci.image.layer.v1.tar+gzip"
    else:
        import zstandard

        zc = zstandard.ZstdCompressor().compressobj()
        parts = [zc.compress(header)] + [zc.compress(zeros) for _ in range(size >> 20)]
        data = b"".join([*parts, zc.compress(bytes(1024)), zc.flush()])
        media = "application/vnd.oci.image.layer.v1.tar+zstd"
    assert len(data) < size // 100
    with pytest.raises(QuotaExceeded) as err:
        _unpack(tmp_path, Blob(data, sha256(data), media), budget=4 << 20, quota=10 << 20)
    assert err.value.limit == 10 << 20
    assert err.value.needed <= (11 << 20)  # stopped within one read (1 MiB) of the budget


def test_many_empty_entries_count_against_the_budget(tmp_path: Path) -> None:
    entries = [file(f"f{i}") for i in range(200)]
    with pytest.raises(QuotaExceeded):
        _unpack(tmp_path, layer_blob(entries), budget=50 * 512, quota=50 * 512)


def test_a_huge_pax_header_is_refused(tmp_path: Path) -> None:
    info, data = file("a", b"x")
    info.pax_headers = {"comment": "c" * (2 << 20)}
    with pytest.raises(LayerError, match="metadata"):
        _unpack(tmp_path, raw_blob(tar_bytes([(info, data)]), "gzip"))


def test_gnu_long_names_and_ustar_prefixes_are_read(tmp_path: Path) -> None:
    deep = "/".join(["d" * 40] * 5) + "/file"
    long_link_target = "t" * 200
    entries = [file(deep, b"deep"), symlink("l", long_link_target)]
    for fmt in (tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT):
        entries_fmt = entries[:1] if fmt == tarfile.USTAR_FORMAT else entries
        layer, _ = _unpack(tmp_path, raw_blob(tar_bytes(entries_fmt, fmt), "gzip"))
        assert (layer / deep).read_bytes() == b"deep"
        if fmt != tarfile.USTAR_FORMAT:
            assert os.readlink(layer / "l") == long_link_target
        shutil.rmtree(layer)


def test_a_multi_member_gzip_is_read_whole(tmp_path: Path) -> None:
    raw = tar_bytes([file("a", b"1"), file("b", b"2")])
    data = gzip.compress(raw[:1024]) + gzip.compress(raw[1024:])
    layer, _ = _unpack(
        tmp_path, Blob(data, sha256(data), "application/vnd.oci.image.layer.v1.tar+gzip")
    )
    assert (layer / "b").read_bytes() == b"2"


@pytest.mark.parametrize(
    "entries",
    [
        [file("x" * 300, b"too long a component")],
        [file("/".join(["d" * 200] * 25), b"too long a path")],
        [file("nul", b"a NUL in a pax path")],
    ],
    ids=["component", "path", "nul"],
)
def test_names_the_kernel_refuses_are_layer_errors(
    tmp_path: Path, entries: list[tuple[tarfile.TarInfo, bytes]]
) -> None:
    if entries[0][0].name == "nul":
        entries[0][0].pax_headers = {"path": "etc/passwd\0.txt"}
    with pytest.raises(LayerError):
        _unpack(tmp_path, layer_blob(entries))


def test_a_symlink_with_an_empty_target_is_a_layer_error(tmp_path: Path) -> None:
    # what the random entries of test_unpack_property.py once found: symlink(2) refuses
    # an empty target with ENOENT, which is not a layer's fault by errno alone
    with pytest.raises(LayerError, match="empty target"):
        _unpack(tmp_path, layer_blob([file("a", b"x"), symlink("a", "")]))


def test_the_record_of_what_was_neutralised_stays_small(tmp_path: Path) -> None:
    _, report = _unpack(tmp_path, layer_blob([fifo(f"p{i}") for i in range(1500)]))
    assert len(report.neutralised) == 1001
    assert report.neutralised[-1].path == "..."


def test_a_file_replaces_a_directory_the_layer_made_earlier(tmp_path: Path) -> None:
    # found by the property test: the directory the entry's parent was resolved from must stay
    # open while the directory in the way is removed
    blob = layer_blob([directory("a/a"), file("a/a/inner", b"x"), file("a/a", b"file")])
    unpack_layer_blob(blob.write(tmp_path / "blob"), blob.digest, blob.media_type, tmp_path / "l")
    assert (tmp_path / "l" / "a" / "a").read_bytes() == b"file"
