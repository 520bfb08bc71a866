"""Red team of the judge, round 3: white-box attacks on ``ascendopt gate`` (own code) written as a coding agent that
has read ``gate/stages.py``, ``judge/engine.py``, ``judge/interleave.py``, ``judge/worker.py``, ``judge/payload.py``,
``judge/evidence.py``, ``judge/weighted.py`` and ``contract/shapes.py`` would write them.

Every test first shows its trick works on its plain target, then asserts that the gate does NOT end green (exit 0)
with a "faster" verdict. A failing test is an attack that got through. Nothing is skipped or xfailed.

Most attacks reach the worker's request loop through one hook the harness does not bind: the worker parses each
request with ``json.loads`` (bound early), which looks ``json._default_decoder`` up at every call; op.py replaces
it, so the code under test sees every request (``null``, ``prepare``, ``go``, ``check``, ``call``) before the
worker acts on it. Each outcome is appended as one JSON line to ``$REDTEAM_LOG`` (default
``/tmp/redteam3-results.jsonl``).
"""

import os
import subprocess
import textwrap

import pytest

from _own_code import commit_repo, freeze_in, frozen_shaped_repo, working_copy
from _redteam import freeze_sleep_repo, gate_logged, hooked_call_ms, run_python
from _redteam import not_a_speedup as _not_a_speedup
from _redteam import tests_pass as _tests_pass
from _sleep_repo import DELAY_S, OP, TEST

PAIRS = "12"
LOG = os.environ.get("REDTEAM_LOG", "/tmp/redteam3-results.jsonl")

# The request hook: every request line the worker parses passes through ``_on(msg)`` first (defined by each attack).
HOOK = textwrap.dedent("""\
    import json as _json

    _state = {"cmd": None, "calls": 0, "i": 0, "n": 0}


    class _Decoder(_json.JSONDecoder):
        def decode(self, s, *args, **kwargs):
            msg = super().decode(s, *args, **kwargs)
            if type(msg) is dict and "cmd" in msg:
                _state["cmd"] = msg["cmd"]
                if msg["cmd"] == "null":  # the judge calibrates a side: its warm-up (5 one-call batches) follows
                    _state["n"] = 0
                if msg["cmd"] == "prepare":
                    _state["calls"], _state["i"] = int(msg.get("calls", 0)), 0
                    _state["n"] += 1
                _on(msg)
            return msg


    _json._default_decoder = _Decoder()


    def _timed():
        # in a timed batch (not the never-compared warm-up that sets the batch size)
        return _state["cmd"] == "go" and _state["n"] > 5
    """)
NON_DUMPABLE = textwrap.dedent("""\
    import ctypes as _ctypes

    _ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: process_vm_readv by the judge fails (EPERM)
    """)


# -- fixtures ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    return freeze_sleep_repo(tmp_path_factory.mktemp("redteam3") / "repo")


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    return working_copy(frozen_repo, tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def frozen_shaped(tmp_path_factory):
    """The mix of ``two_bucket_mix(0.009)``: a 16-row bucket of 0.9 % (too light to time) and a 256-row one."""
    return frozen_shaped_repo(tmp_path_factory.mktemp("redteam3-shaped") / "repo", OP, TEST, 0.009)


@pytest.fixture
def shaped(frozen_shaped, tmp_path, monkeypatch):
    return working_copy(frozen_shaped, tmp_path, monkeypatch)


BIG_BENCH = textwrap.dedent("""\
    import torch
    from op import my_op


    def inputs(seed):
        return (torch.randn(9000, 8000),)  # 288 MB a call: every batch is handed over as seeds


    def workload(x):
        with torch.profiler.record_function("my_op_kernel"):
            return my_op(x)
    """)
BIG_OP = textwrap.dedent("""\
    import time

    import torch

    DELAY_S = 0.002


    def my_op(x):
        time.sleep(DELAY_S)
        return x[:64, :64] * 2 + 1
    """)
BIG_TEST = textwrap.dedent("""\
    import torch
    from op import my_op


    def test_close():
        x = torch.arange(6.0).reshape(2, 3)
        assert torch.allclose(my_op(x), x * 2 + 1)
    """)


@pytest.fixture(scope="module")
def frozen_big(tmp_path_factory):
    root = tmp_path_factory.mktemp("redteam3-big") / "repo"
    commit_repo(root, {"op.py": BIG_OP, "bench.py": BIG_BENCH, "tests/test_op.py": BIG_TEST})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py",
                             "--kernel-filter", "my_op_kernel", "--no-profile", "--no-precheck")
    assert code == 0, err
    return root


@pytest.fixture
def big(frozen_big, tmp_path, monkeypatch):
    return working_copy(frozen_big, tmp_path, monkeypatch)


# -- helpers ----------------------------------------------------------------------------------------------------


def _gate(repo, op: str | None, pairs: str = PAIRS, *extra: str):
    return gate_logged(repo, op, pairs, *extra, log=LOG)




def _py(repo, code: str) -> subprocess.CompletedProcess:
    done = run_python(repo, code)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


# ==============================================================================================================
# Class A: the untimed requests around a batch (``evidence.untimed_excess``)
# ==============================================================================================================

SKIM = 0.22  # the share of each call's work moved out of the timed window (once under the allowance, 2 ms + 10 %)


def test_a1_prepare_hook_skims_work_into_the_untimed_loading(repo):
    """Class A, budgeted skim before the clock: the request hook sees ``prepare`` (untimed) and does 22 % of the
    coming batch's work there (``calls`` is in the request); ``go`` does the other 78 %. Nothing is really faster.
    On a loaded host the requests' own noise once hid it; their run-queue wait is now taken off both sides."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)",
                    f"def my_op(x):\n    time.sleep(DELAY_S * ({1 - SKIM} if _timed() else 1))")
    op += "\n\n" + HOOK + textwrap.dedent(f"""\


        def _on(msg):
            if msg["cmd"] == "prepare" and _state["n"] > 5:
                time.sleep(DELAY_S * {SKIM} * int(msg.get("calls", 1)))
        """)
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    assert hooked_call_ms(repo) < DELAY_S * 1e3 * 0.85  # the call alone looks faster
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)
    perf = stages["performance"]
    assert perf["status"] == "inconclusive" and any("outside the timed window" in d for d in
                                                   perf["data"]["audit"]["doubts"]), perf


def test_a2_unreadable_output_turns_the_parent_read_off_then_finish_after_the_clock(repo):
    """Class A + the parent's raw read: the first warm-up batch returns a plain tensor over an ``mmap`` region that
    op.py has ``mprotect``ed to PROT_NONE (and the worker is made non-dumpable, for a judge that is not root).
    The judge's ``process_vm_readv`` fails ("cannot read"), ``_read_stopped`` turns ``parent_reads`` off for the
    rest of the command, silently (no doubt), and from then on every batch's outputs are read by the worker in its
    ``check`` request. The request hook sees ``check`` first: it makes the region readable again and fills in the
    values. Timed batches return uninitialized tensors after 78 % of the work; the values (and the other 22 %)
    come when ``check`` arrives, after the parent's clock stopped."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)\n    return x * 2 + 1", textwrap.dedent(f"""\
        import ctypes as _ct
        import mmap as _mmap

        _pending, _hidden = [], []
        _mprotect = _ct.CDLL(None).mprotect
        _mprotect.argtypes = [_ct.c_void_p, _ct.c_size_t, _ct.c_int]


        def _unreadable(x):
            size = (x.numel() * 4 + 4095) // 4096 * 4096
            region = _mmap.mmap(-1, size)
            out = torch.frombuffer(region, dtype=torch.float32, count=x.numel()).view(x.shape)
            _mprotect(out.data_ptr(), size, 0)  # PROT_NONE: nobody reads it, not even root's process_vm_readv
            _hidden.append((out.data_ptr(), size, region))
            return out


        def my_op(x):
            if _state["cmd"] == "go":
                time.sleep(DELAY_S * ({1 - SKIM} if _timed() else 1))
                out = torch.empty_like(x) if _state.get("off") else _unreadable(x)  # values come later
                _state["off"] = True
                _pending.append((x, out))
                return out
            time.sleep(DELAY_S)
            return x * 2 + 1
        """))
    op += "\n\n" + NON_DUMPABLE + "\n\n" + HOOK + textwrap.dedent(f"""\


        def _on(msg):
            if msg["cmd"] == "check":
                for ptr, size, _ in _hidden:
                    _mprotect(ptr, size, 3)
                for x, out in _pending:
                    time.sleep(DELAY_S * {SKIM} if _state["n"] > 5 else 0)
                    torch.mul(x, 2, out=out).add_(1)
                _pending.clear()
        """)
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    done = _py(repo, """\
        import op, torch
        op._state["cmd"], op._state["calls"], op._state["n"] = "go", 1, 9
        out = op.my_op(torch.ones(64, 64))
        op._json.loads('{"cmd": "check"}')
        print(bool(torch.equal(out, torch.full((64, 64), 3.0))))""")
    assert done.stdout.split()[-1] == "True"  # right values, but only after "check"
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)


# ==============================================================================================================
# Class B: the parent's clock -- the round trip it subtracts is measured on requests the candidate answers
# ==============================================================================================================


def test_b1_slow_null_requests_inflate_the_subtracted_round_trip(repo):
    """Class B, calibration: ``_Child.calibrate`` times 15 ``null`` requests and subtracts their median from every
    timed batch (``(wall - rtt) / calls``). The hook sleeps 2 ms on each ``null``, only there: the candidate's
    ``rtt_ms`` is inflated, so each batch reads 2 ms short. The op itself is exactly the frozen one; the worker's
    own reading differs from the parent's by ~20 %, inside ``AGREE_REL`` (25 %). In the warm-up (never compared)
    each call sleeps 2 ms more, so the batch size stays one call and the 2 ms are not spread over several."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)",
                    "def my_op(x):\n    time.sleep(DELAY_S + (0.002 if _state['cmd'] == 'go' and not _timed() else 0))")
    op += "\n\n" + HOOK + textwrap.dedent("""\


        def _on(msg):
            if msg["cmd"] == "null":
                time.sleep(0.002)
        """)
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    done = _py(repo, """\
        import time, op
        t = time.perf_counter(); op._json.loads('{"cmd": "null"}'); print((time.perf_counter() - t) * 1e3)""")
    assert float(done.stdout.split()[-1]) >= 1.9  # a null request now costs 2 ms
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)


def test_b2_slow_null_requests_and_a_scaled_worker_timer(repo):
    """Class B, calibration + the second reading: as b1 with 5 ms a ``null`` request, and the worker's own
    reading shifted to match (``ascendopt.device.backends.Timer.stop`` is a class attribute, patched in the worker;
    the module docstring says only the second reading moves). Parent and worker then agree on a ~45 % speedup of
    the frozen op."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)",
                    "def my_op(x):\n    time.sleep(DELAY_S + (0.005 if _state['cmd'] == 'go' and not _timed() else 0))")
    op += "\n\n" + HOOK + textwrap.dedent("""\

        from ascendopt.device import backends as _backends

        _stop = _backends.Timer.stop
        _backends.Timer.stop = lambda self: _stop(self) - 5.0  # the worker's reading of a batch, less the 5 ms


        def _on(msg):
            if msg["cmd"] == "null":
                time.sleep(0.005)
        """)
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    done = _py(repo, """\
        import time, op
        t = time.perf_counter(); op._json.loads('{"cmd": "null"}'); print((time.perf_counter() - t) * 1e3)""")
    assert float(done.stdout.split()[-1]) >= 4.9
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)


# ==============================================================================================================
# Class C: the timed outputs' audit (``engine._against``)
# ==============================================================================================================


def test_c1_own_warmup_output_makes_only_the_baselines_call_0_count(repo):
    """Class C, asymmetric audit: warm-up batches' outputs are never compared, yet they set ``output_bytes``. The
    candidate returns an 80 MB tensor in warm-up (a one-call batch), so its timed batches are not ``full`` while
    the baseline's are. ``_against`` then zips the candidate's fingerprints with the baseline's ``prints`` (None
    when full: nothing compared) and compares the candidate's audited call with the baseline's CALL 0. The
    candidate computes call 0 of each batch and returns that same tensor for every call (storage shared across
    calls): each audited call equals the baseline's call 0. Warm-up being fast also makes the batch 50+ calls."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)\n    return x * 2 + 1", textwrap.dedent("""\
        def my_op(x):
            if _state["cmd"] == "go":
                if _state["calls"] == 1:  # a warm-up batch: never compared
                    return torch.empty(20_000_000)
                i, _state["i"] = _state["i"], _state["i"] + 1
                if i == 0:
                    time.sleep(DELAY_S)
                    _state["out"] = x * 2 + 1
                else:
                    time.sleep(DELAY_S / 2)  # a plausible ~2x
                return _state["out"]
            time.sleep(DELAY_S)
            return x * 2 + 1
        """))
    op += "\n\n" + HOOK + "\n\ndef _on(msg):\n    pass\n"
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    done = _py(repo, """\
        import op, torch
        op._json.loads('{"cmd": "prepare", "calls": 3}'); op._json.loads('{"cmd": "go"}')
        a, b = torch.randn(64, 64), torch.randn(64, 64)
        print(bool(torch.equal(op.my_op(a), a * 2 + 1)), bool(torch.equal(op.my_op(b), b * 2 + 1)))""")
    assert done.stdout.split()[-2:] == ["True", "False"]  # the second call of a batch is wrong
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)


# ==============================================================================================================
# Class D: the weighted verdict over a shape mix
# ==============================================================================================================


def test_d1_untimed_light_bucket_arbitrarily_slower(shaped):
    """Class D, buckets under ``TIMED_WEIGHT`` (1 %): the 16-row bucket holds 0.9 % of the frozen device time and is
    never timed (only called once by the differential check, for values). The candidate is 2x faster on 256 rows
    and 100x slower on 16 rows: the served mix as frozen (0.9 % / 99.1 %) costs MORE than before, yet the weighted
    verdict speaks for the timed 99.1 % only."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)", textwrap.dedent("""\
        def my_op(x):
            time.sleep(DELAY_S * (100 if x.dim() == 2 and x.shape[0] == 16 else 0.5))"""))
    (shaped / "op.py").write_text(op)
    _tests_pass(shaped)
    done = _py(shaped, """\
        import time, torch, op
        def t(rows):
            x = torch.randn(rows, 64); s = time.perf_counter(); op.my_op(x); return time.perf_counter() - s
        print(0.009 * t(16) + 0.991 * t(256))""")
    assert float(done.stdout.split()[-1]) > DELAY_S * 1.2  # the frozen mix now costs > 1.2x the frozen op's time
    code, stages, _ = _gate(shaped, None)
    _not_a_speedup(code, stages)


def test_d2_wrong_on_tile_multiples_between_the_buckets(shaped):
    """Class D, hidden shapes: the differential check calls the workload's own shape (64 rows), each bucket (16,
    256) and three hidden shapes: the range's smallest (16), largest (256) and one ODD size ("off every tile
    multiple"). The candidate is 2x faster everywhere and wrong on every row count that is a multiple of 32 other
    than 64 and 256 (32, 96, 128, 160, ... : the served shapes between the buckets that a tiled kernel is most
    likely to be fed). The frozen tests use 2 and 2x3 elements."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)\n    return x * 2 + 1", textwrap.dedent("""\
        def my_op(x):
            time.sleep(DELAY_S / 2)
            if x.dim() == 2 and x.shape[0] % 32 == 0 and x.shape[0] not in (64, 256):
                return x * 2  # the tail of a tile-multiple fast path
            return x * 2 + 1
        """))
    (shaped / "op.py").write_text(op)
    _tests_pass(shaped)
    done = _py(shaped, """\
        import torch, op
        x = torch.randn(128, 64); print(bool(torch.allclose(op.my_op(x), x * 2 + 1)))""")
    assert done.stdout.split()[-1] == "False"  # wrong at 128 rows, inside the mix's range
    code, stages, _ = _gate(shaped, None)
    _not_a_speedup(code, stages)


# ==============================================================================================================
# Class E: the seeds fallback (inputs above ``TRUSTED_INPUT_BYTES`` a batch are made by each worker itself)
# ==============================================================================================================




# ==============================================================================================================
# Class F: the baseline's process -- another worker of the same user, dumpable, reachable by process_vm_writev
# ==============================================================================================================

SLOW_BASELINE = textwrap.dedent("""\
    import ctypes as _ct
    import os as _os
    import struct as _struct

    import numpy as _np

    _libc = _ct.CDLL(None, use_errno=True)


    class _Vec(_ct.Structure):
        _fields_ = [("base", _ct.c_void_p), ("len", _ct.c_size_t)]


    def _rw(pid, address, data=None, n=0):
        if data is None:
            buf = _ct.create_string_buffer(n)
            got = _libc.process_vm_readv(pid, _ct.byref(_Vec(_ct.addressof(buf), n)), 1,
                                         _ct.byref(_Vec(address, n)), 1, 0)
            return buf.raw[:max(got, 0)]
        buf = _ct.create_string_buffer(data, len(data))
        return _libc.process_vm_writev(pid, _ct.byref(_Vec(_ct.addressof(buf), len(data))), 1,
                                       _ct.byref(_Vec(address, len(data))), 1, 0)


    def _maps(pid):
        rows = []
        for line in open(f"/proc/{pid}/maps"):
            parts = line.split()
            lo, hi = (int(v, 16) for v in parts[0].split("-"))
            rows.append((lo, hi, parts[1], int(parts[2], 16), parts[5] if len(parts) > 5 else ""))
        return rows


    def _siblings():
        me, parent = _os.getpid(), _os.getppid()
        for d in _os.listdir("/proc"):
            if not d.isdigit() or int(d) == me:
                continue
            try:
                stat = open(f"/proc/{d}/stat").read()
                argv = open(f"/proc/{d}/cmdline", "rb").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"ascendopt.judge.worker" in argv:
                yield int(d)


    def _slow(old, new):
        # PyFloat_Type's address in the sibling: same library file and offset as here (ASLR moves the base only)
        mine = id(float)
        lo, hi, _, off, path = next(r for r in _maps("self") if r[0] <= mine < r[1])
        file_at = off + mine - lo
        hits = 0
        for pid in _siblings():
            rows = _maps(pid)
            there = next((r[0] + file_at - r[3] for r in rows if r[4] == path and r[3] <= file_at < r[3] + r[1] - r[0]),
                         None)
            if there is None:
                continue
            for lo, hi, perms, _, name in rows:
                if not perms.startswith("rw") or name not in ("", "[heap]") or hi - lo > 1 << 30:
                    continue
                raw = _rw(pid, lo, n=hi - lo)
                words = _np.frombuffer(raw[: len(raw) // 8 * 8], dtype="<u8")
                bits = _struct.unpack("<Q", _struct.pack("<d", old))[0]
                at = _np.nonzero((words[:-1] == there) & (words[1:] == bits))[0]
                for k in at:
                    hits += _rw(pid, lo + int(k) * 8 + 8, _struct.pack("<d", new)) == 8
        return hits
    """)




# ==============================================================================================================
# Class G: what the differential check enforces only on its own calls, and the host's cores
# ==============================================================================================================


def test_g1_inputs_written_in_place_only_in_timed_calls(repo):
    """Class G, call vs go: the differential check fails a candidate that writes its inputs in place and the frozen
    commit does not (``input_writes``), but it looks only at its own ``call`` requests; the timed batches never
    check inputs. The request hook tells ``call`` from ``go``: in ``go`` the op writes the result into its input
    and returns the input itself (no output allocation: the modelled cost of allocating is half the call), and
    the parent's raw read of the output, which aliases the input memory, sees the right values."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)\n    return x * 2 + 1", textwrap.dedent("""\
        def my_op(x):
            if _state["cmd"] == "go":
                time.sleep(DELAY_S / 2)  # no new output buffer
                return x.mul_(2).add_(1)  # the caller's input is clobbered
            time.sleep(DELAY_S)
            return x * 2 + 1
        """))
    op += "\n\n" + HOOK + "\n\ndef _on(msg):\n    pass\n"
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    done = _py(repo, """\
        import op, torch
        op._json.loads('{"cmd": "go"}')
        x = torch.ones(64, 64); op.my_op(x)
        print(bool(torch.equal(x, torch.ones(64, 64))))""")
    assert done.stdout.split()[-1] == "False"  # the input was written in place
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)


MANY_LIGHT = "kernel: my_op_kernel\nbuckets:\n" + "".join(
    f"  - {{shapes: [[{rows}, 64]], dtypes: [fp32], weight: 0.009}}\n" for rows in range(8, 23)) + \
    "  - {shapes: [[256, 64]], dtypes: [fp32], weight: 0.865}\n"


def test_d3_many_untimed_buckets(tmp_path, monkeypatch):
    """Class D, many light buckets: the mix holds 15 buckets of 0.9 % each (13.5 % of the frozen device time,
    decode-like row counts 8..22; ``MAX_BUCKETS`` is 16) and one heavy bucket (256 rows, 86.5 %). Only the heavy
    one was timed; the verdict "spoke for the timed share". The candidate is 2x faster on 256 rows and 8x slower
    below 64 rows: the served mix as frozen costs ~1.5x the baseline's, and the gate read a speedup."""
    root = tmp_path / "frozen"
    from _own_code import SHAPED_BENCH

    commit_repo(root, {"op.py": OP, "bench.py": SHAPED_BENCH, "tests/test_op.py": TEST, "mix.yaml": MANY_LIGHT})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_op_kernel", "--shapes-file", "mix.yaml", "--no-profile", "--no-precheck")
    assert code == 0, err
    repo = working_copy(root, tmp_path, monkeypatch)
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)", textwrap.dedent("""\
        def my_op(x):
            time.sleep(DELAY_S * (8 if x.dim() == 2 and x.shape[0] < 64 else 0.5))"""))
    (repo / "op.py").write_text(op)
    _tests_pass(repo)
    done = _py(repo, """\
        import time, torch, op
        def t(rows):
            x = torch.randn(rows, 64); s = time.perf_counter(); op.my_op(x); return time.perf_counter() - s
        print(sum(0.009 * t(r) for r in range(8, 23)) + 0.865 * t(256))""")
    assert float(done.stdout.split()[-1]) > DELAY_S * 1.4  # the frozen mix now costs ~1.5x the frozen op's time
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)


def test_b3_slow_null_requests_on_a_shape_mix(shaped):
    """Class B on the weighted verdict: as b1 (2 ms a ``null`` request, 2 ms more a warm-up call so the batch stays
    one call), on the shape-mix contract, where every timed bucket is calibrated again (``Judged.__init__``): the
    hook inflates each calibration alike, and the weighted verdict inherits the per-bucket error."""
    op = OP.replace("def my_op(x):\n    time.sleep(DELAY_S)",
                    "def my_op(x):\n    time.sleep(DELAY_S + (0.002 if _state['cmd'] == 'go' and not _timed() else 0))")
    op += "\n\n" + HOOK + textwrap.dedent("""\


        def _on(msg):
            if msg["cmd"] == "null":
                time.sleep(0.002)
        """)
    (shaped / "op.py").write_text(op)
    _tests_pass(shaped)
    done = _py(shaped, """\
        import time, op
        t = time.perf_counter(); op._json.loads('{"cmd": "null"}'); print((time.perf_counter() - t) * 1e3)""")
    assert float(done.stdout.split()[-1]) >= 1.9
    code, stages, _ = _gate(shaped, None)
    _not_a_speedup(code, stages)


# Not here, open (benchmarks/RESULTS.md, "The judge against a white-box red team"; the attacks are on the branch
# redteam-3): e1, inputs too large to hand over are made in each worker from the batch's seeds, so the candidate's
# own inputs() runs and can do the work while "making" them; f1, the candidate's worker writes the baseline
# worker's memory with process_vm_writev (a same-user process, root here, where PR_SET_DUMPABLE does not stop it).
