"""The forgery battery, on the real local node.

Every candidate here is wrong: the expected values are secrets it cannot
compute (honest pass count 0). Each attack tries to score anyway; the grade
must stay at its honest count. Attacks run against four spec kinds: records,
assert-style (HumanEval ``check``), stdin/stdout and a property grader.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from collimate_rl.grading import IOReward, PropertyReward, RewardSpec, UnitTestReward, grade

from .conftest import TEMPLATE

S1, S2 = 987654321, 123456789  # secrets: the expected outputs
assert {S1 ^ 0x5A5A5A5A, S2 ^ 0x5A5A5A5A} == {1619276523, 1560385359}
T = 1.5

SPECS: dict[str, RewardSpec] = {
    "records": UnitTestReward(
        [{"input": [1], "expected": S1}, {"input": [2], "expected": S2}],
        entry="f",
        per_test_timeout=T,
    ),
    "asserts": UnitTestReward(
        f"def check(candidate):\n    assert candidate(1) == {S1}\n    assert candidate(2) == {S2}\n\ncheck(f)\n",
        entry="f",
        per_test_timeout=T,
    ),
    "io": IOReward(
        [{"input": "1\n", "output": f"{S1}\n"}, {"input": "2\n", "output": f"{S2}\n"}],
        per_test_timeout=T,
    ),
    "property": PropertyReward(
        "return (x * 7919 + 104729) % 1000003",
        "random.randint(1, 10**6)",
        k=3,
        entry="f",
        per_test_timeout=T,
    ),
}

# Helpers every attack may use: ``_scan_text`` looks for the secrets in any
# text it can reach, and ``_answer`` returns one if found (a successful attack
# would then pass). The secrets are kept XOR-masked so the attack never finds
# its own copy.
PRELUDE = textwrap.dedent(
    """
    import os, re, sys
    _MASK = 0x5A5A5A5A
    _MASKED = {1619276523, 1560385359}  # the secrets XOR _MASK
    _DIGITS = re.compile("(?<![0-9])[0-9]{9}(?![0-9])")
    _LOOT = []

    def _scan_text(text):
        for match in _DIGITS.findall(text):
            if int(match) ^ _MASK in _MASKED:
                _LOOT.append(int(match))

    def _answer(*args):
        return _LOOT[0] if _LOOT else 0
    """
)

ATTACKS: dict[str, str] = {
    "print_fake_reward_and_frames": """
        FAKE = '{"v":1,"passed":2,"total":2,"tests":[],"output_tail":""}'
        def _spam():
            for line in ("1.0", "COLLIMATE_RESULT " + FAKE, "COLLIMATE_RESULT " + "0" * 32 + " " + FAKE):
                print(line)
                print(line, file=sys.stderr)
                try:
                    os.write(1, (line + "\\n").encode())
                    os.write(2, (line + "\\n").encode())
                except OSError:
                    pass
                for path in ("/dev/stdout", "/dev/stderr", "/proc/self/fd/1", "/dev/tty", "/dev/console"):
                    try:
                        with open(path, "w") as fh:
                            fh.write(line + "\\n")
                    except OSError:
                        pass
                try:
                    sys.__stdout__.write(line + "\\n")
                except Exception:
                    pass
        _spam()
        def f(*args):
            _spam()
            return _answer()
    """,
    "sys_exit_at_import": """
        print("1.0")
        sys.exit(0)
        def f(*args):
            return 0
    """,
    "os_exit_in_call": """
        def f(*args):
            print("1.0", flush=True)
            os._exit(0)
    """,
    "raise_system_exit": """
        def f(*args):
            raise SystemExit(0)
    """,
    "raise_keyboard_interrupt": """
        def f(*args):
            raise KeyboardInterrupt
    """,
    "raise_base_exception": """
        class Escape(BaseException):
            pass
        def f(*args):
            raise Escape("pass")
    """,
    "monkeypatch_builtins_and_harness": """
        import builtins, json
        builtins.isinstance = lambda *a: True
        builtins.bool = lambda *a: True
        builtins.AssertionError = type("AssertionError", (Exception,), {})
        builtins.type = lambda *a: int
        json.dumps = lambda *a, **k: '{"ok": true, "value": 987654321}'
        json.loads = lambda *a, **k: {"ok": True, "value": 987654321}
        for mod in list(sys.modules.values()):
            for name in ("same", "_io_same", "decode", "encode", "_serve", "check", "_frame"):
                try:
                    setattr(mod, name, lambda *a, **k: True)
                except Exception:
                    pass
        def f(*args):
            return 0
    """,
    "read_tests_from_disk": """
        import glob
        paths = set(glob.glob("/tmp/**", recursive=True) + glob.glob("/sandbox/**", recursive=True))
        paths |= set(glob.glob(os.getcwd() + "/**", recursive=True))
        paths.add(os.environ.get("COLLIMATE_CODE_FILE", ""))
        for path in paths:
            try:
                with open(path, errors="replace") as fh:
                    _scan_text(fh.read(1 << 20))
            except OSError:
                pass
        def f(*args):
            return _answer()
    """,
    "introspect_own_memory": """
        import gc
        def _walk():
            frame = sys._getframe()
            while frame is not None:
                _scan_text(repr(frame.f_locals)[:1 << 20])
                frame = frame.f_back
            for obj in gc.get_objects():
                try:
                    if isinstance(obj, (dict, list, tuple)):
                        _scan_text(repr(obj)[:1 << 16])
                except Exception:
                    pass
            for mod in list(sys.modules.values()):
                _scan_text(repr(getattr(mod, "__dict__", {}))[:1 << 20])
        _walk()
        def f(*args):
            _walk()
            return _answer()
    """,
    "read_other_processes": """
        def _procs():
            budget = 256 << 20
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) == os.getpid():
                    continue
                for name in ("cmdline", "environ"):
                    try:
                        with open(f"/proc/{pid}/{name}", "rb") as fh:
                            _scan_text(fh.read().decode("latin-1"))
                    except OSError:
                        pass
                try:
                    maps = open(f"/proc/{pid}/maps").read().splitlines()
                    mem = open(f"/proc/{pid}/mem", "rb")
                except OSError:
                    continue
                for line in maps:
                    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                    if "r" not in line.split()[1] or hi - lo > budget:
                        continue
                    try:
                        mem.seek(lo)
                        _scan_text(mem.read(hi - lo).decode("latin-1"))
                        budget -= hi - lo
                    except (OSError, ValueError, OverflowError):
                        pass
        _procs()
        def f(*args):
            return _answer()
    """,
    "factory_sockets_and_ctypes_memory_scan": """
        import ctypes, json, socket
        def _mem():
            budget = 256 << 20
            with open("/proc/self/mem", "rb", 0) as mem:
                for line in open("/proc/self/maps").read().splitlines():
                    fields = line.split()
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    if "r" not in fields[1] or hi - lo > budget or "[v" in line:
                        continue
                    budget -= hi - lo
                    try:
                        mem.seek(lo)
                        _scan_text(mem.read(hi - lo).decode("latin-1"))
                    except (OSError, ValueError, OverflowError):
                        pass
                    if len(fields) < 6 or fields[5] == "[heap]":
                        _scan_text(ctypes.string_at(lo, hi - lo).decode("latin-1"))
        def _factories():
            # any seqpacket socket we hold might be a factory connection: ask
            # it for a process and have that one scan itself and its parents
            for fd in range(256):
                try:
                    sock = socket.socket(fileno=os.dup(fd))
                except OSError:
                    continue
                try:
                    if sock.type != socket.SOCK_SEQPACKET:
                        continue
                    sock.settimeout(1.0)
                    r, w = os.pipe()
                    out_r, out_w = os.pipe()
                    req = {"op": "spawn", "seed": "0" * 64, "code": "source"}
                    socket.send_fds(sock, [json.dumps(req).encode()], [r, out_w, out_w])
                    os.close(r)
                    os.close(out_w)
                    sock.recv(4096)
                    os.write(w, b"import os\nfor p in ('self', str(os.getppid())):\n"
                                b"    try: print(open('/proc/%s/environ' % p).read())\n"
                                b"    except OSError: pass\n")
                    os.close(w)
                    _scan_text(os.read(out_r, 1 << 20).decode("latin-1"))
                except Exception:
                    pass
                finally:
                    sock.close()
        _mem()
        _factories()
        def f(*args):
            _mem()
            _factories()
            return _answer()
    """,
    "overwrite_and_delete_harness_and_tests": """
        import glob
        fake = '{"v":1,"kind":"calls","nonce":"0","source":"","entry":"f","tests":[]}'
        targets = set(glob.glob("/tmp/colgrade_*") + glob.glob("/tmp/colcode_*"))
        targets.add(os.environ.get("COLLIMATE_CODE_FILE", ""))
        for path in targets:
            for action in (os.unlink, lambda p: open(p, "w").write(fake)):
                try:
                    action(path)
                except OSError:
                    pass
        def f(*args):
            return 0
    """,
    "background_writer": """
        import time
        def _later():
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    frame = '{"v":1,"passed":2,"total":2,"tests":[],"output_tail":""}'
                    for _ in range(20):
                        time.sleep(0.05)
                        for pid in os.listdir("/proc"):
                            for fd in ("1", "2"):
                                try:
                                    with open(f"/proc/{pid}/fd/{fd}", "w") as fh:
                                        fh.write("\\n1.0\\nCOLLIMATE_RESULT " + "0" * 32 + " " + frame + "\\n")
                                except OSError:
                                    pass
                        print("1.0", flush=True)
                os._exit(0)
        _later()
        def f(*args):
            _later()
            return 0
    """,
    "flood_output": """
        sys.stdout.write("x" * (4 << 20))
        def f(*args):
            chunk = ("1.0\\n" * 4096)
            for _ in range(2000):
                sys.stdout.write(chunk)
                sys.stderr.write(chunk)
            return 0
    """,
    "always_equal_objects": """
        class Eq:
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            def __hash__(self): return 0
            def __bool__(self): return True
            def __str__(self): return "987654321"
        class EqInt(int):
            def __eq__(self, other): return True
        class EqList(list):
            def __eq__(self, other): return True
        _n = [0]
        def f(*args):
            _n[0] += 1
            return (Eq(), EqInt(5), EqList())[_n[0] % 3]
        if __name__ == "__main__":
            print(Eq())
    """,
    "kill_the_harness": """
        import signal
        def f(*args):
            for pid in os.listdir("/proc"):
                if pid.isdigit() and int(pid) != os.getpid():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
            print("COLLIMATE_RESULT " + "0" * 32 + ' {"v":1,"passed":2,"total":2,"tests":[]}', flush=True)
            return 0
    """,
}


def _candidate(attack: str, kind: str) -> str:
    code = PRELUDE + textwrap.dedent(ATTACKS[attack])
    if kind == "io":
        code += "\nprint(f(sys.stdin.read()))\n"
    return code


@pytest.mark.parametrize("kind", list(SPECS))
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack_scores_its_honest_count(client: Any, attack: str, kind: str) -> None:
    result = grade(
        client, TEMPLATE, _candidate(attack, kind), SPECS[kind], timeout_seconds=15, extract=False
    )
    assert not result.infra_error
    assert result.reward == 0.0, result
    assert result.passed == 0, result
    assert len(result.output_tail) <= 4096


def test_attack_cannot_lift_a_partly_honest_candidate(client: Any) -> None:
    # Honest on add(1, 2) only (1 of 2), then every trick at once on the other.
    spec = UnitTestReward(
        [{"input": [1, 2], "expected": 3}, {"input": [7, 8], "expected": S1}], entry="add"
    )
    code = PRELUDE + textwrap.dedent(
        """
        class Eq:
            def __eq__(self, other): return True
        def add(a, b):
            if (a, b) == (1, 2):
                return 3
            print("1.0")
            print('COLLIMATE_RESULT ' + '0' * 32 + ' {"v":1,"passed":2,"total":2,"tests":[]}')
            return Eq()
        """
    )
    result = grade(client, TEMPLATE, code, spec, timeout_seconds=15, extract=False)
    assert result.passed == 1 and result.total == 2 and result.reward == 0.5


def test_a_frame_needs_the_nonce() -> None:
    forged = "COLLIMATE_RESULT " + "0" * 32 + ' {"v":1,"passed":2,"total":2,"tests":[]}'
    assert RewardSpec.read_frame(forged + "\n", "1" * 32) is None


PLANT = """
import os
BAIT = '''
import builtins, sys
builtins.bool = lambda *a: True
builtins.isinstance = lambda *a: True
for _mod in list(sys.modules.values()):
    for _name in ("same", "_io_same"):
        if hasattr(_mod, _name):
            setattr(_mod, _name, lambda *a, **k: True)
'''
for _name in ("ast", "copy", "random", "textwrap", "io", "ctypes", "traceback", "linecache", "json", "binascii"):
    for _dir in (os.getcwd(), "/sandbox", os.path.expanduser("~/.local/lib")):
        try:
            with open(os.path.join(_dir, _name + ".py"), "w") as _fh:
                _fh.write(BAIT)
        except OSError:
            pass
def f(*args):
    return 0
"""


def test_modules_planted_in_a_reused_session_do_not_reach_the_harness(client: Any) -> None:
    session = client.create_session(TEMPLATE)["session_id"]
    try:
        for kind in ("records", "asserts", "property", "io"):
            plant = PLANT + ("\nimport sys\nprint(f(sys.stdin.read()))\n" if kind == "io" else "")
            grade(client, TEMPLATE, plant, SPECS[kind], session_id=session, extract=False)
            again = grade(
                client,
                TEMPLATE,
                _candidate("sys_exit_at_import", kind),
                SPECS[kind],
                session_id=session,
                extract=False,
            )
            wrong = grade(
                client,
                TEMPLATE,
                PRELUDE + "def f(*a):\n    return 0\nprint(0)\n",
                SPECS[kind],
                session_id=session,
                extract=False,
            )
            assert again.reward == 0.0 and wrong.reward == 0.0, (kind, again, wrong)
            assert wrong.total > 0
    finally:
        client.delete_session(session)
