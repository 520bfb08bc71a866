"""Values across the judge's process boundary (``judge.payload``) and what the parent judges on them
(``judge.evidence``)."""

import pytest
import torch

from ascendopt.judge.evidence import compare_values, input_writes, refusals, untimed_excess
from ascendopt.judge.payload import Opaque, PayloadError, RawReader, Refused, decode, encode

TOL = {"fp32": {"rtol": 1e-5, "atol": 1e-6}, "bf16": {"rtol": 1.6e-2, "atol": 1e-5}}


def test_a_nested_value_round_trips_with_its_dtypes_shapes_and_strides_read_in_c_order():
    reader = RawReader(torch)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    value = {"t": base.t(),  # not contiguous
             "e": torch.ones(3, 1).expand(3, 5),  # stride 0
             "b": torch.randn(5, dtype=torch.bfloat16)[::2],
             "c": torch.randn(3, dtype=torch.complex64),
             "i": torch.arange(4, dtype=torch.int64), "k": torch.tensor([True, False]),
             "z": torch.empty(0, 3), "s": [1, 2.5, "x", None, True], "o": object()}
    back = decode(encode((value, base[1:3, 2:]), reader))
    got, view = back
    for key in ("t", "e", "b", "c", "i", "k", "z"):
        assert got[key].dtype == value[key].dtype and torch.equal(got[key], value[key]), key
    assert got["s"] == [1, 2.5, "x", None, True] and got["o"] == Opaque("object")
    assert torch.equal(view, base[1:3, 2:])


def test_what_code_in_the_process_patches_later_does_not_change_what_the_reader_reads():
    """The reader binds torch._C.TensorBase's own descriptors and reads memory past the dispatcher: a patched
    ``torch.Tensor`` method and an active dispatch mode that would lie about the values change nothing."""
    from torch.utils._python_dispatch import TorchDispatchMode

    reader = RawReader(torch)
    x = torch.arange(6, dtype=torch.float32)

    class Lies(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return torch.zeros_like(out) if isinstance(out, torch.Tensor) else out

    saved = {name: getattr(torch.Tensor, name) for name in ("cpu", "contiguous", "numpy", "tolist")}
    try:
        for name in saved:
            setattr(torch.Tensor, name, lambda self, *a, **k: torch.zeros(6))
        with Lies():
            blob = encode(x, reader)
    finally:
        for name, fn in saved.items():
            setattr(torch.Tensor, name, fn)
    assert torch.equal(decode(blob), torch.arange(6, dtype=torch.float32))


def test_tensors_that_are_not_plain_and_materialized_are_refused_without_being_read():
    class Lazy(torch.Tensor):
        pass

    reader = RawReader(torch)
    back = decode(encode([torch.ones(3).as_subclass(Lazy), torch.empty(3, device="meta"), torch.ones(2)], reader))
    assert isinstance(back[0], Refused) and "not a plain torch.Tensor" in back[0].problem
    assert isinstance(back[1], Refused) and "meta" in back[1].problem
    assert torch.equal(back[2], torch.ones(2))
    assert len(refusals(back)) == 2


@pytest.mark.parametrize("cut", [3, 20, -1])
def test_a_damaged_payload_is_a_payload_error(cut):
    blob = encode([torch.ones(4)], RawReader(torch))
    with pytest.raises(PayloadError):
        decode(blob[:cut])


def test_compare_values_fails_wrong_missing_extra_refused_and_restructured_parts():
    base = {"y": torch.ones(4), "n": 3}
    assert all(c.passed for c in compare_values(base, {"y": torch.ones(4) * (1 + 1e-7), "n": 3}, TOL))
    failed = {c.name: c.message for c in compare_values(base, {"y": torch.zeros(4), "m": 3}, TOL) if not c.passed}
    assert set(failed) == {"output['y']", "output['n']", "output['m']"}
    assert "out of tolerance" in failed["output['y']"] and "missing" in failed["output['n']"]
    refused = compare_values(base, {"y": Refused("a tensor without storage"), "n": 3}, TOL)
    assert [c.message for c in refused if not c.passed] == ["output['y']: a tensor without storage"]
    # equivalence off: values are not compared, but a refused tensor still fails
    assert all(c.passed for c in compare_values(base, {"y": torch.zeros(4), "n": 3}, None))
    assert not all(c.passed for c in compare_values(base, {"y": Refused("lazy"), "n": 3}, None))


def test_input_writes_name_the_inputs_a_call_changed_in_place():
    made = [(torch.ones(3), torch.zeros(2))]
    after = [(torch.tensor([1.0, 5.0, 1.0]), torch.zeros(2))]
    changed = input_writes(made, after)
    assert list(changed) == ["inputs[0][0]"]
    assert input_writes(made, [(torch.ones(3), torch.zeros(2))]) == {}


def test_untimed_excess_flags_work_moved_out_of_the_timed_window_and_allows_noise():
    ref = [{"untimed_ms": 2.0, "parent": 1.0, "calls": 10}] * 10
    # a loaded host: a few requests late by many ms, the median unmoved
    noisy = [{"untimed_ms": 2.5, "parent": 0.9, "calls": 10}] * 7 + [{"untimed_ms": 60.0, "parent": 0.9,
                                                                      "calls": 10}] * 3
    assert untimed_excess(noisy, ref) is None
    moved = [{"untimed_ms": 3.5, "parent": 0.5, "calls": 10}] * 10  # 1.5 ms more a batch against a 5 ms batch
    assert "work finished outside the timed window" in untimed_excess(moved, ref)


def test_untimed_excess_takes_the_run_queue_wait_off_each_side_and_still_sees_moved_work():
    """A loaded host: every request of the candidate waited 4 ms more for a CPU than the reference's did. That
    wait is the host's: no excess. Work moved out of the timed window stays visible under the same load."""
    ref = [{"untimed_ms": 2.0, "untimed_waited_ms": 0.5, "parent": 1.0, "calls": 10}] * 10
    loaded = [{"untimed_ms": 6.5, "untimed_waited_ms": 5.0, "parent": 0.9, "calls": 10}] * 10
    assert untimed_excess(loaded, ref) is None
    assert untimed_excess([{**r, "untimed_waited_ms": 0.0} for r in loaded], ref) is not None  # unread: counted
    moved = [{"untimed_ms": 8.0, "untimed_waited_ms": 5.0, "parent": 0.5, "calls": 10}] * 10
    assert "work finished outside the timed window" in untimed_excess(moved, ref)


def test_a_main_threads_wait_is_excused_less_what_its_own_other_threads_ran():
    from ascendopt.process import excused_wait_ms

    before = {10: (1_000_000, 2_000_000), 11: (0, 0)}
    assert excused_wait_ms(before, {10: (1_500_000, 5_000_000), 11: (0, 0)}, 10) == pytest.approx(3.0)
    # its own helper thread ran 2 ms meanwhile: only 1 ms of the wait is the host's
    assert excused_wait_ms(before, {10: (1_500_000, 5_000_000), 11: (2_000_000, 0)}, 10) == pytest.approx(1.0)
    assert excused_wait_ms(before, {10: (1_500_000, 5_000_000), 11: (9_000_000, 0), 12: (1, 0)}, 10) == 0.0
    assert excused_wait_ms(None, {10: (0, 5_000_000)}, 10) == 0.0


def test_the_audit_says_when_the_host_gives_no_cpu_time_of_the_untimed_requests():
    """Where a host gives no per-thread run time (no ``/proc/PID/task/TID/schedstat``: not Linux), the untimed
    requests are compared in wall time only: the audit says so beside the verdict, not as a doubt. Control: readings
    that carry the run time say nothing."""
    from types import SimpleNamespace

    from ascendopt.judge import engine

    def reading(**extra):
        return {"untimed_ms": 2.0, "parent": 1.0, "worker": 1.0, "calls": 10, **extra}

    def judged(**extra):
        made = engine.Judged.__new__(engine.Judged)
        made.names, made.reference = ["baseline", "candidate"], "baseline"
        made.sides = [SimpleNamespace(readings=[reading(**extra)] * 10, external_stops=0) for _ in made.names]
        made.judge_stops, made.scheduling, made.idle, made.outside = {}, {}, [], {}
        return made

    found = engine.audit(judged())
    assert found.not_checked == [engine.UNTIMED_CPU_UNCHECKED] and not found.doubts and not found.wrong
    assert "schedstat" in found.not_checked[0]
    assert engine.audit(judged(untimed_run_ms=1.0)).not_checked == []


def test_dtypes_and_devices_cross_as_themselves_and_a_dtype_torch_lacks_is_refused():
    """A ``dtype=`` or ``device=`` argument (the frozen tests' calls, ``judge.testcalls``) decodes as the torch object
    it was, not an opaque name; a payload naming a dtype torch does not have does not decode."""
    import json
    import struct

    value = {"dtype": torch.bfloat16, "device": torch.device("cpu"), "x": torch.ones(2)}
    back = decode(encode(value, RawReader(torch)))
    assert back["dtype"] is torch.bfloat16 and back["device"] == torch.device("cpu")
    header = json.dumps({"tree": {"dt": "float99"}, "tensors": []}).encode()
    with pytest.raises(PayloadError, match="float99"):
        decode(struct.pack("<Q", len(header)) + header)
