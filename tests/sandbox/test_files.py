"""Byte-exact upload/download over exec: round trips, corruption, failed uploads."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collimate_rl.errors import CollimateTaskError, CollimateTransportError
from collimate_rl.sandbox import DOWNLOAD_MAX_BYTES, Sandbox
from collimate_rl.sandbox._files import UPLOAD_CHUNK_CHARS, upload_flow

MiB = 1024 * 1024


@pytest.fixture
def box(client: Any) -> Iterator[Sandbox]:
    with Sandbox("python3", client=client, default_timeout=60) as sandbox:
        yield sandbox


def sandbox_sha(box: Sandbox, path: str) -> str:
    out = box.exec(command=f"sha256sum {shlex.quote(path)} | cut -d' ' -f1").stdout
    return out.strip()


def listing(box: Sandbox, folder: str = ".") -> list[str]:
    result = box.exec(command=f"ls -A {shlex.quote(folder)}")
    return sorted(result.stdout.split())


EDGE_CASES = [
    b"",
    b"\x00",
    b"\x00" * 1000,
    b"no final newline",
    b"\n",
    b"\r\n\r\n",
    b"line\n" * 3,
    b"'quotes' \"and\" $dollars `ticks` %s %% \\",
    bytes(range(256)),
    "unicode ✓ — ü".encode(),
    b"\xff\xfe\x00\x00invalid utf-8 \xc3\x28",
]


@pytest.mark.parametrize("data", EDGE_CASES, ids=lambda d: f"{len(d)}B")
def test_round_trip_edge_cases(box: Sandbox, data: bytes) -> None:
    box.upload_bytes("edge/case.bin", data)
    assert box.download("edge/case.bin") == data
    assert sandbox_sha(box, "edge/case.bin") == hashlib.sha256(data).hexdigest()


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.binary(max_size=4096))
def test_round_trip_arbitrary_bytes(box: Sandbox, data: bytes) -> None:
    box.upload_bytes("hyp.bin", data)
    assert box.download("hyp.bin") == data


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    size=st.sampled_from([UPLOAD_CHUNK_CHARS // 4 * 3 - 1, UPLOAD_CHUNK_CHARS // 4 * 3, 200_001]),
    seed=st.integers(0, 2**32 - 1),
)
def test_round_trip_around_chunk_boundaries(box: Sandbox, size: int, seed: int) -> None:
    data = os.urandom(size - 1) + bytes([seed % 256])
    box.upload_bytes("chunky.bin", data)
    assert box.download("chunky.bin") == data


def test_round_trip_several_mib(box: Sandbox) -> None:
    data = os.urandom(3 * MiB) + b"\x00\x00tail without newline"
    box.upload_bytes("big/blob.bin", data)
    assert sandbox_sha(box, "big/blob.bin") == hashlib.sha256(data).hexdigest()
    assert box.download("big/blob.bin") == data


def test_download_over_one_exec_is_chunked(box: Sandbox) -> None:
    size = DOWNLOAD_MAX_BYTES + 3 * 65536 + 17
    made = box.exec(command=f"head -c {size} /dev/urandom > huge.bin && printf end >> huge.bin")
    assert made.ok, made.stdout
    data = box.download("huge.bin")
    assert len(data) == size + 3 and data.endswith(b"end")
    assert hashlib.sha256(data).hexdigest() == sandbox_sha(box, "huge.bin")


def test_download_of_sandbox_written_file(box: Sandbox) -> None:
    assert box.exec(command=r"printf 'a\000b\nc' > made.bin").ok
    assert box.download("made.bin") == b"a\x00b\nc"


def test_paths_with_spaces_quotes_and_dashes(box: Sandbox) -> None:
    for path in ["dir with space/it's a file.bin", "-leading-dash", "a/b/c/d/e.bin"]:
        box.upload_bytes(path, path.encode())
        assert box.download(path) == path.encode()


def test_hostile_paths_are_data_not_code(box: Sandbox) -> None:
    hostile = ["$(touch pwned)/x.bin", "`touch pwned`.bin", '"; touch pwned; ".bin', "*"]
    for path in hostile:
        box.upload_bytes(path, b"safe")
        assert box.download(path) == b"safe"
    assert box.exec(command="echo x > file").ok
    with pytest.raises(CollimateTaskError):
        box.upload_bytes("file/$(touch pwned)/y.bin", b"z")
    with pytest.raises(CollimateTaskError):
        box.download("$(touch pwned)")
    assert not box.exec(command="test -e pwned").ok


def test_upload_overwrites_and_leaves_no_temp(box: Sandbox) -> None:
    box.upload_bytes("d/t.bin", b"old contents, longer")
    box.upload_bytes("d/t.bin", b"new")
    assert box.download("d/t.bin") == b"new"
    assert listing(box, "d") == ["t.bin"]


def test_download_missing_file_is_a_task_error(box: Sandbox) -> None:
    with pytest.raises(CollimateTaskError) as info:
        box.download("nope/missing.bin")
    assert info.value.exit_code == 44
    assert "no such file" in info.value.output
    assert info.value.status is None and info.value.error_code is None


def test_download_directory_is_a_task_error(box: Sandbox) -> None:
    assert box.exec(command="mkdir -p adir").ok
    with pytest.raises(CollimateTaskError) as info:
        box.download("adir")
    assert info.value.exit_code == 44


def test_download_max_bytes(box: Sandbox) -> None:
    box.upload_bytes("ten.bin", b"0123456789")
    assert box.download("ten.bin", max_bytes=10) == b"0123456789"
    with pytest.raises(CollimateTaskError) as info:
        box.download("ten.bin", max_bytes=9)
    assert info.value.exit_code == 47


def test_upload_rejects_text(box: Sandbox) -> None:
    with pytest.raises(TypeError):
        box.upload_bytes("x.txt", "text")  # type: ignore[arg-type]


def test_upload_accepts_bytearray_and_memoryview(box: Sandbox) -> None:
    box.upload_bytes("ba.bin", bytearray(b"\x00ba"))
    box.upload_bytes("mv.bin", memoryview(b"\x00mv"))
    assert box.download("ba.bin") == b"\x00ba"
    assert box.download("mv.bin") == b"\x00mv"


# ---------------------------------------------------------------- failed uploads


def test_upload_onto_directory_fails_and_keeps_it(box: Sandbox) -> None:
    assert box.exec(command="mkdir -p target && echo keep > target/inside").ok
    with pytest.raises(CollimateTaskError) as info:
        box.upload_bytes("target", b"data")
    assert info.value.exit_code == 46
    assert listing(box).count("target") == 1
    assert box.download("target/inside") == b"keep\n"
    assert [n for n in listing(box) if ".colup_" in n] == []


def test_upload_under_a_file_fails_without_target(box: Sandbox) -> None:
    assert box.exec(command="echo x > plainfile").ok
    with pytest.raises(CollimateTaskError) as info:
        box.upload_bytes("plainfile/child.bin", b"data")
    assert info.value.exit_code == 45
    assert box.download("plainfile") == b"x\n"


def test_upload_into_read_only_dir_keeps_old_target(box: Sandbox) -> None:
    assert box.exec(command="mkdir -p ro && printf old > ro/t && chmod a-w ro").ok
    probe = box.exec(command="touch ro/probe 2>/dev/null && echo writable || echo readonly")
    if "writable" in probe.stdout:
        pytest.skip("running as root: a read-only mode does not stop writes here")
    with pytest.raises(CollimateTaskError) as info:
        box.upload_bytes("ro/t", b"new data")
    assert info.value.exit_code == 45
    assert box.download("ro/t") == b"old"
    assert listing(box, "ro") == ["t"]


class Tamper:
    """Wraps a client; ``edit(call_index, command, response) -> response`` rewrites execs."""

    def __init__(self, inner: Any, edit: Any) -> None:
        self.inner = inner
        self.edit = edit
        self.calls = 0
        self.commands: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def session_exec(self, session_id: str, **kw: Any) -> Any:
        index = self.calls
        self.calls += 1
        self.commands.append(kw.get("command") or "")
        return self.edit(index, kw, lambda: self.inner.session_exec(session_id, **kw))


def _with_stdout(resp: Any, stdout: str) -> dict[str, Any]:
    out = dict(resp)
    out["stdout"] = stdout
    return out


def test_upload_dropped_chunk_fails_and_keeps_old_target(box: Sandbox) -> None:
    box.upload_bytes("keep.bin", b"previous")
    data = os.urandom(UPLOAD_CHUNK_CHARS // 4 * 3 * 2 + 5)  # three chunks

    def edit(index: int, kw: Any, run: Any) -> Any:
        if index == 1:  # pretend the middle chunk was written; it was not
            return {"stdout": "", "exit_code": 0}
        return run()

    tampered = Sandbox.adopt(Tamper(box.client, edit), box.session_id or "", template="python3")
    with pytest.raises(CollimateTaskError) as info:
        tampered.upload_bytes("keep.bin", data)
    assert info.value.exit_code == 46
    assert "size mismatch" in info.value.output
    assert box.download("keep.bin") == b"previous"
    assert [n for n in listing(box) if ".colup_" in n] == []


def test_upload_infra_error_stays_infra_and_cleans_up(box: Sandbox) -> None:
    box.upload_bytes("infra.bin", b"previous")
    data = os.urandom(UPLOAD_CHUNK_CHARS // 4 * 3 * 2)

    def edit(index: int, kw: Any, run: Any) -> Any:
        if index == 1:
            raise CollimateTransportError("POST /v1/sessions/x/exec: connection reset")
        return run()

    wrapper = Tamper(box.client, edit)
    tampered = Sandbox.adopt(wrapper, box.session_id or "", template="python3")
    with pytest.raises(CollimateTransportError):
        tampered.upload_bytes("infra.bin", data)
    assert wrapper.commands[-1].startswith("rm -f -- ")  # the best-effort cleanup ran
    assert box.download("infra.bin") == b"previous"
    assert [n for n in listing(box) if ".colup_" in n] == []


def test_upload_without_confirmation_frame_raises(box: Sandbox) -> None:
    def edit(index: int, kw: Any, run: Any) -> Any:
        resp = run()
        return _with_stdout(resp, "") if "mv -f" in kw["command"] else resp

    tampered = Sandbox.adopt(Tamper(box.client, edit), box.session_id or "", template="python3")
    with pytest.raises(CollimateTaskError, match="confirmation"):
        tampered.upload_bytes("conf.bin", b"abc")


def test_upload_hitting_a_file_size_limit_keeps_old_target(box: Sandbox) -> None:
    """``ulimit -f`` makes writes past 4 KiB fail mid-upload, like a full disk."""
    box.upload_bytes("full.bin", b"previous")

    def edit(index: int, kw: Any, run: Any) -> Any:
        if "base64 -d" in kw["command"]:
            kw["command"] = "ulimit -f 8\n" + kw["command"]
        return run()

    tampered = Sandbox.adopt(Tamper(box.client, edit), box.session_id or "", template="python3")
    with pytest.raises(CollimateTaskError) as info:
        tampered.upload_bytes("full.bin", os.urandom(100_000))
    assert info.value.exit_code == 45
    assert box.download("full.bin") == b"previous"
    assert [n for n in listing(box) if ".colup_" in n] == []


def _flip_payload(stdout: str) -> str:
    lines = stdout.split("\n")
    for i, line in enumerate(lines):
        if re.match(r"COLDL_[0-9a-f]{32} ", line):
            payload = lines[i + 1]
            swapped = "B" if payload[0] != "B" else "C"
            lines[i + 1] = swapped + payload[1:]
    return "\n".join(lines)


TAMPERINGS = {
    "flipped payload char": _flip_payload,
    "truncated output": lambda s: s[: len(s) // 2],
    "dropped close frame": lambda s: s.rsplit("\n", 2)[0] + "\n",
    "duplicated frame": lambda s: s + s,
    "invalid base64": lambda s: re.sub(r"\n([A-Za-z0-9+/=]{8})", r"\n!\1", s, count=1),
    "wrong sha": lambda s: re.sub(r"( [0-9a-f]{64})\n", " " + "0" * 64 + "\n", s, count=1),
    "wrong size": lambda s: re.sub(r"(COLDL_[0-9a-f]{32}) (\d+) ", r"\1 1\2 ", s, count=1),
    "extra payload line": lambda s: re.sub(r"(COLDL_[0-9a-f]{32} .*\n)", r"\1QUJD\n", s, count=1),
}


@pytest.mark.parametrize("how", list(TAMPERINGS))
def test_download_corruption_raises_never_wrong_bytes(box: Sandbox, how: str) -> None:
    box.upload_bytes("victim.bin", b"precious \x00 bytes" * 50)

    def edit(index: int, kw: Any, run: Any) -> Any:
        resp = run()
        return _with_stdout(resp, TAMPERINGS[how](resp["stdout"]))

    tampered = Sandbox.adopt(Tamper(box.client, edit), box.session_id or "", template="python3")
    with pytest.raises(CollimateTaskError) as info:
        tampered.download("victim.bin")
    assert info.value.exit_code == 0


def test_download_file_changed_between_chunks_raises(box: Sandbox) -> None:
    made = box.exec(command=f"head -c {DOWNLOAD_MAX_BYTES + 10} /dev/zero > grow.bin")
    assert made.ok

    def edit(index: int, kw: Any, run: Any) -> Any:
        if index == 1:
            box.exec(command="printf more >> grow.bin")
        return run()

    tampered = Sandbox.adopt(Tamper(box.client, edit), box.session_id or "", template="python3")
    with pytest.raises(CollimateTaskError, match="changed"):
        tampered.download("grow.bin")


def test_upload_flow_scripts_stay_under_arg_max() -> None:
    flow = upload_flow("p", os.urandom(UPLOAD_CHUNK_CHARS))
    script = next(flow)
    assert len(script.encode()) < 110 * 1024
    flow.close()
