"""Setup commands over an image (``LocalRuntime.bake_image``): run once in the image's root,
as its user, with its ``Env``, ``WorkingDir`` and ``/bin/sh``, network only when asked;
their upper layer (whiteouts included) becomes one more read-only layer of the template.

Real Debian root filesystems (``_rootfs.py``), real bwrap containers and overlays; the
runtime is the image tests' (``img_rt``: bookworm as root with ``Env`` FOO=bar and
``WorkingDir`` /work, bookworm run as ``User`` app).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from collimate_rl.node.runtime import (
    ImageWithoutShell,
    LocalRuntime,
    LocalSession,
    RuntimeError_,
    TemplateSpec,
)
from collimate_rl.node.runtime._sandbox.bake import ROOT_CAPS
from collimate_rl.node.runtime.sandbox_uid import resolve_bake_range

from ..runtime.conftest import run
from ._rootfs import rootfs_layer
from .conftest import app_user_layer, image

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


async def session(rt: LocalRuntime, template: str) -> LocalSession:
    s = await rt.create_session(template, new_id(template))
    assert isinstance(s, LocalSession)
    return s


def layer_dirs(rt: LocalRuntime) -> list[str]:
    return sorted(p.name for p in (rt.state_dir / "layers").iterdir())


def bookworm(template_id: str) -> TemplateSpec:
    return TemplateSpec(
        template_id,
        image=image(
            (rootfs_layer("bookworm-py"),), env=(("FOO", "bar"),), working_dir="/work", ref="b"
        ),
    )


async def test_setup_files_and_whiteouts_are_in_sessions_and_forks(img_rt: LocalRuntime) -> None:
    layer = rootfs_layer("bookworm-py")
    assert (layer / "etc/hostname").exists() and (layer / "usr/share/doc").is_dir()
    tid = new_id("setup")
    spec = await img_rt.bake_image(
        bookworm(tid),
        [
            'id -u > /opt/who; echo "$FOO $HOME $(pwd)" >> /opt/who',
            "echo baked > made.txt && mkdir -p /srv/data && echo v1 > /srv/data/state",
            "rm /etc/hostname && rm -r /usr/share/doc",  # whiteouts
            # an opaque folder: the image's files in it hidden, the new one shown
            "rm -r /usr/share/man && mkdir /usr/share/man && echo new > /usr/share/man/only",
            "echo scratch > /tmp/scratch",
        ],
    )
    assert spec.image is not None and len(spec.image.baked) == 1
    upper = spec.image.baked[0]
    assert upper.name == "upper" and upper.parent.parent == img_rt.state_dir / "layers"
    assert sorted(p.name for p in upper.parent.iterdir()) == ["upper"]  # work, skeleton: gone
    assert (upper / "etc/hostname").is_char_device()  # overlayfs' whiteout, as a lower now
    assert os.getxattr(upper / "usr/share/man", "user.overlay.opaque") == b"y"
    # on disk the sandbox uid's: sessions see them as the image's user's (root here)
    made_or_copied_up = ("opt/who", "srv/data", "work/made.txt", "usr/share", "etc")
    assert {(upper / p).stat().st_uid for p in made_or_copied_up} == {img_rt.sandbox_uid}
    assert not (upper / "tmp/scratch").exists()  # /tmp was scratch
    assert (layer / "etc/hostname").exists() and (layer / "usr/share/doc").is_dir()
    s = await session(img_rt, tid)
    try:
        out = await run(
            s,
            command="cat /opt/who; pwd; cat made.txt /srv/data/state; "
            "test -e /etc/hostname || echo no-hostname; test -e /usr/share/doc || echo no-doc; "
            "test -e /tmp/scratch || echo no-scratch; ls /usr/share/man; "
            "python3 -c 'print(6*7)'",
        )
        assert out.exit_code == 0, out.output
        assert out.output.decode().splitlines() == [
            "0",
            "bar /root /work",
            "/work",
            "baked",
            "v1",
            "no-hostname",
            "no-doc",
            "no-scratch",
            "only",
            "42",
        ]
        await run(s, command="echo mine > /srv/data/state && rm made.txt")
        kids = await s.fork([new_id("k") for _ in range(2)])
        for i, kid in enumerate(kids):
            out = await run(kid, command=f"cat /srv/data/state; echo k{i} > /srv/data/state")
            assert out.output == b"mine\n", out.output
            out = await run(kid, command="test -e made.txt || echo gone; test -e /etc/hostname")
            assert out.output == b"gone\n" and out.exit_code == 1
        outs = [await run(k, command="cat /srv/data/state") for k in kids]
        assert [o.output for o in outs] == [b"k0\n", b"k1\n"]
        for kid in kids:
            await kid.close()
    finally:
        await s.close()
    other = await session(img_rt, tid)  # a fresh session starts from the setup's result
    try:
        out = await run(other, command="cat made.txt /srv/data/state")
        assert out.output == b"baked\nv1\n"
    finally:
        await other.close()


async def test_setup_files_are_the_image_users(img_rt: LocalRuntime) -> None:
    """Root's image: the setup's files are root's in a session, as the image's own are;
    an image run as ``app``: the setup runs as app, its files are app's."""
    tid = new_id("owned")
    await img_rt.bake_image(
        bookworm(tid), ["mkdir /opt/tool && touch /opt/tool/bin && chmod 0700 /opt/tool"]
    )
    s = await session(img_rt, tid)
    try:
        out = await run(
            s,
            command="stat -c '%U:%G %a' /opt/tool /opt/tool/bin /etc/passwd; id -un; "
            "echo more > /opt/tool/bin && echo writable",
        )
        assert out.output.decode().splitlines() == [
            "root:root 700",
            "root:root 644",
            "root:root 644",
            "root",
            "writable",
        ], out.output
    finally:
        await s.close()
    appuser = img_rt.template_spec("appuser")
    assert appuser.image is not None
    app_tid = new_id("app")
    await img_rt.bake_image(
        dataclasses.replace(appuser, template_id=app_tid),
        ["id -un > $HOME/made && pwd >> $HOME/made", "touch /etc/nope 2>/dev/null || true"],
    )
    s = await session(img_rt, app_tid)
    try:
        out = await run(
            s,
            command="cat $HOME/made; stat -c '%U:%G' $HOME/made $HOME /etc/passwd; "
            "test -e /etc/nope || echo no-root-files; echo again >> $HOME/made && echo ok",
        )
        assert out.output.decode().splitlines() == [
            "app",
            "/",
            "app:app",
            "app:app",
            "nobody:nogroup",  # (root's, unmapped, as in any session of that image)
            "no-root-files",
            "ok",
        ], out.output
    finally:
        await s.close()


async def test_a_failing_setup_is_the_typed_error_and_leaves_nothing(img_rt: LocalRuntime) -> None:
    before = layer_dirs(img_rt)
    tid = new_id("fails")
    with pytest.raises(RuntimeError_, match=r"exit 3") as info:
        await img_rt.bake_image(
            bookworm(tid),
            ["echo first-command-ran", "echo to-stderr >&2; cat /etc/debian_version; exit 3", "x"],
        )
    text = str(info.value)
    assert f"bake of {tid!r} failed" in text and "first-command-ran" in text
    assert "to-stderr" in text and "+ x" not in text and "\n12." in text  # the image's /etc
    assert tid not in img_rt.templates() and layer_dirs(img_rt) == before


async def test_the_setup_has_no_network_unless_asked(img_rt: LocalRuntime) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    connect = (
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
        f"{port}), timeout=5).close(); print('connected')\""
    )
    accepted: list[bool] = []

    async def accept() -> None:
        loop = asyncio.get_running_loop()
        listener.setblocking(False)
        conn, _ = await loop.sock_accept(listener)
        conn.close()
        accepted.append(True)

    try:
        before = layer_dirs(img_rt)
        with pytest.raises(RuntimeError_, match="bake of") as info:
            await img_rt.bake_image(bookworm(new_id("netless")), [connect])
        text = str(info.value)
        assert "\nconnected\n" not in text and "Error" in text, text
        assert layer_dirs(img_rt) == before
        waiter = asyncio.ensure_future(accept())
        tid = new_id("networked")
        spec = await img_rt.bake_image(
            dataclasses.replace(bookworm(tid), network=True),
            [connect + " > /opt/net"],
            network=True,
        )
        await asyncio.wait_for(waiter, 10)
        assert accepted == [True]
        assert spec.network
        s = await session(img_rt, tid)
        try:
            assert (await run(s, command="cat /opt/net")).output == b"connected\n"
        finally:
            await s.close()
    finally:
        listener.close()


@pytest.fixture
def shell_less() -> Iterator[Path]:
    """A layer with a program and no ``/bin/sh``."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "noshell"
        (folder / "bin").mkdir(parents=True)
        (folder / "bin/app").write_bytes(b"#!/nothing\n")
        (folder / "bin/app").chmod(0o755)
        yield folder


async def test_an_image_without_a_shell_is_refused(img_rt: LocalRuntime, shell_less: Path) -> None:
    before = layer_dirs(img_rt)
    spec = TemplateSpec("noshell", image=image((shell_less,), ref="oci:/x:noshell"))
    with pytest.raises(ImageWithoutShell, match="no /bin/sh"):
        await img_rt.bake_image(spec, ["true"])
    assert "noshell" not in img_rt.templates() and layer_dirs(img_rt) == before


async def test_a_bake_over_an_image_template_runs_in_its_root(img_rt: LocalRuntime) -> None:
    """``bake(base=<an image template>)`` runs its setup in the image's root too, stacked
    on what the base's own setup left."""
    first = new_id("first")
    await img_rt.bake_image(bookworm(first), ["echo one > /opt/one"])
    second = new_id("second")
    spec = await img_rt.bake(second, first, ["cat /opt/one > /opt/two; rm /opt/one"], network=False)
    assert spec.image is not None and len(spec.image.baked) == 2
    s = await session(img_rt, second)
    try:
        out = await run(s, command="cat /opt/two; test -e /opt/one || echo one-gone; id -u")
        assert out.output == b"one\none-gone\n0\n", out.output
    finally:
        await s.close()


async def test_what_a_setup_installs_counts_as_the_images(img_rt: LocalRuntime) -> None:
    """The image's facts are read from the baked layer too: a ``python3`` a setup puts on
    the ``PATH`` of an image without one serves ``code`` execs."""
    nopy = img_rt.template_spec("nopy")
    tid = new_id("gets-python")
    fake = "#!/bin/sh\necho fake-python $#\n"
    await img_rt.bake_image(
        dataclasses.replace(nopy, template_id=tid),
        [f"printf '{fake}' > /usr/local/bin/python3 && chmod 755 /usr/local/bin/python3"],
    )
    s = await session(img_rt, tid)
    try:
        out = await run(s, code="print(1)")
        assert out.output.startswith(b"fake-python "), out.output
    finally:
        await s.close()


async def test_close_removes_the_setup_layers(require_bwrap: None) -> None:
    from collimate_rl.node.runtime import create_runtime

    from ..runtime.conftest import TEST_LIMITS
    from .conftest import IMAGE_SANDBOX_UID

    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        rt = create_runtime(
            "bwrap", state_dir=state, limits=TEST_LIMITS, sandbox_uid=IMAGE_SANDBOX_UID + 2
        )
        await rt.start()
        try:
            app = app_user_layer(Path(tmp) / "app", rootfs_layer("bookworm-py"))
            spec = TemplateSpec("app", image=image((rootfs_layer("bookworm-py"), app), user="app"))
            baked = await rt.bake_image(spec, ["touch $HOME/x"])
            assert baked.image is not None and baked.image.baked[0].is_dir()
        finally:
            await rt.close()
        assert not state.exists()


def upper_entries(upper: Path) -> list[Path]:
    return [upper, *upper.rglob("*")]


#: A tiny package built and installed in the setup: ``dpkg -i`` chowns what it unpacks.
DEMO_DEB = [
    "mkdir -p /tmp/pkg/DEBIAN /tmp/pkg/usr/local/bin /tmp/pkg/var/lib/demo",
    "printf 'Package: demo\\nVersion: 1.0\\nArchitecture: all\\nMaintainer: t <t@t>\\n"
    "Description: demo\\n' > /tmp/pkg/DEBIAN/control",
    "printf '#!/bin/sh\\necho demo-ran\\n' > /tmp/pkg/usr/local/bin/demo",
    "chmod 755 /tmp/pkg/usr/local/bin/demo",
    "echo state > /tmp/pkg/var/lib/demo/state && chown -R _apt:nogroup /tmp/pkg/var/lib/demo",
    "dpkg-deb --build /tmp/pkg /tmp/demo.deb && dpkg -i /tmp/demo.deb",
    "stat -c '%U:%G' /var/lib/demo/state >> /opt/owners",
]


async def test_a_root_setup_has_the_images_owners(img_rt: LocalRuntime) -> None:
    """A root node maps the image's ids 0..65535 in a setup: the image's files show with
    their real owners, root can chown to others and change what others own (``_apt``'s
    ``/var/lib/apt/lists/partial``), ``dpkg`` installs; the layer is the sandbox uid's on
    disk (setuid bits cleared), so sessions see it as the image user's, as ever."""
    tid = new_id("owners")
    spec = await img_rt.bake_image(
        bookworm(tid),
        [
            "cat /proc/self/uid_map > /opt/maps; grep CapEff /proc/self/status >> /opt/maps",
            "stat -c '%U:%G' /var/lib/apt/lists/partial > /opt/owners",
            "echo x > /x && chown 42:65534 /x && stat -c '%u:%g' /x >> /opt/owners",
            "touch /var/lib/apt/lists/partial/x && rm -rf /var/lib/apt/lists/partial/*",
            "apt-get -o Debug::NoLocking=1 check && apt-get clean && dpkg --configure -a",
            "touch /var/lib/apt/lists/partial/kept && chown _apt /var/lib/apt/lists/partial/kept",
            *DEMO_DEB,
            "cp /bin/true /usr/local/bin/suid && chmod 4755 /usr/local/bin/suid",
            "mkdir -m 2775 /srv/shared && rm /etc/hostname",
        ],
    )
    assert spec.image is not None
    upper = spec.image.baked[0]
    # the setup ran in the bake's reserved range, as root with Docker's default capabilities
    maps = (upper / "opt/maps").read_text().split("\n")
    assert maps[0].split() == ["0", str(resolve_bake_range(img_rt.sandbox_uid)), "65536"]
    cap_eff = next(line for line in maps if line.startswith("CapEff:")).split()[1]
    assert int(cap_eff, 16) == sum(1 << c for c in ROOT_CAPS) == 0xA80425FB
    entries = upper_entries(upper)
    assert {(p.lstat().st_uid, p.lstat().st_gid) for p in entries} == {
        (img_rt.sandbox_uid, img_rt.sandbox_uid)
    }
    assert not [p for p in entries if p.lstat().st_mode & 0o6000]
    assert (upper / "usr/local/bin/suid").stat().st_mode & 0o7777 == 0o755
    assert (upper / "srv/shared").stat().st_mode & 0o7777 == 0o775
    assert (upper / "etc/hostname").is_char_device()
    assert (upper / "var/lib/apt/lists/partial/kept").exists()
    s = await session(img_rt, tid)
    try:
        out = await run(
            s,
            command="cat /opt/owners; demo; dpkg-query -W -f '${Status}\\n' demo; cat /x; "
            "cat /var/lib/demo/state; "
            "stat -c '%U:%G' /x; test -e /etc/hostname || echo no-hostname",
        )
        assert out.exit_code == 0, out.output
        assert out.output.decode().splitlines() == [
            "_apt:root",
            "42:65534",
            "_apt:nogroup",
            "demo-ran",
            "install ok installed",
            "x",
            "state",
            "root:root",  # the sandbox uid's on disk: the image user's in a session
            "no-hostname",
        ], out.output
    finally:
        await s.close()


async def test_one_uid_setups_cannot_chown_and_say_why(
    img_rt: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that is not root (or an image ``User`` beyond 65535) maps the ``User`` only:
    a chown to another user fails, and the error says why."""
    monkeypatch.setattr(img_rt, "_bake_ids", lambda facts: None)
    before = layer_dirs(img_rt)
    with pytest.raises(RuntimeError_, match="only id") as info:
        await img_rt.bake_image(bookworm(new_id("one-uid")), ["touch /x && chown 42 /x"])
    assert "apt-get cannot work" in str(info.value) and layer_dirs(img_rt) == before


def deb_mirror_reachable() -> bool:
    import urllib.request

    url = "http://deb.debian.org/debian/dists/bookworm/InRelease"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5):
            return True
    except OSError:
        return False


async def test_apt_get_install_in_a_networked_setup(img_rt: LocalRuntime) -> None:
    if not await asyncio.to_thread(deb_mirror_reachable):
        pytest.skip("deb.debian.org is not reachable from this host")
    tid = new_id("jq")
    spec = await img_rt.bake_image(
        dataclasses.replace(bookworm(tid), network=True),
        [
            "apt-get update -q",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends jq",
            "rm -rf /var/lib/apt/lists/*",
        ],
        network=True,
    )
    assert spec.image is not None
    assert {p.lstat().st_uid for p in upper_entries(spec.image.baked[0])} == {img_rt.sandbox_uid}
    s = await session(img_rt, tid)
    try:
        out = await run(s, command="echo '{\"a\": [1, 2]}' | jq -c '.a | add'")
        assert out.output == b"3\n", out.output
    finally:
        await s.close()
