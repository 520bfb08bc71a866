"""One optimize-round end to end on the CPU interpreter with the gate's test kernel and its virtual clock.

``t_scale``'s ``EXTRA`` tunable plants an extra pass over EXTRA % of the elements; its virtual clock
advances 1 us per element launched (+-0.3 % seeded jitter), so verdicts do not depend on this
machine's load. Profiles are skipped here (``reprofile=False``): the demo test covers them.
"""

import dataclasses
import functools

import pytest

import _gate_kernels as gk
from _cli_json import json_envelope, json_payload
from ascendopt.errors import UsageError
from ascendopt.freeze.task import freeze_kernel
from ascendopt.rounds import auto as round_auto
from ascendopt.rounds import records as rounds
from ascendopt.rounds import run as round_run
from ascendopt.workspace import Workspace


@pytest.fixture
def ws(tmp_path, monkeypatch):
    gk.install(monkeypatch)
    w = Workspace(tmp_path / ".ascendopt")
    freeze_kernel(w, kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", config={"EXTRA": 50}, max_rounds=5)
    return w


def _round(ws, sets, hypothesis="vector-bound: drop the planted extra pass", **kw):
    return round_run.run_round(ws, hypothesis=hypothesis, sets=sets, pairs=12, reprofile=False,
                               timer=gk.virtual_clock, **kw)


def test_keep_then_revert_then_drop(ws, monkeypatch):
    keep = _round(ws, {"EXTRA": "0"})
    r = keep.record
    assert keep.exit_code == 0 and r.verdict == "keep" and r.number == 1
    assert r.timing["ratio_vs_best"] == pytest.approx(1 / 1.5, rel=0.02)  # 50 % fewer elements launched
    assert r.change == {"kind": "tunables", "set": {"EXTRA": 0}, "config": {"BLOCK": 64, "EXTRA": 0}}
    assert r.summary["speed"]["ratio_vs_baseline"] == pytest.approx(1 / 1.5, rel=0.02)
    assert r.ub["enforced"] is False and r.target_metric == "vec_ratio"
    assert ws.round_path(1).exists()

    # round 2 starts from the best (EXTRA=0) and adds one change; 5 % more work is measurably slower
    slower = _round(ws, {"EXTRA": "5"}, hypothesis="try a small extra pass")
    t = slower.record.timing
    assert slower.record.verdict == "revert" and t["vs_best"] == "slower"
    assert set(slower.record.timing["cases"][0]["samples_ms"]) == {"baseline", "best", "candidate"}
    assert t["ratio_vs_best"] == pytest.approx(1.05, rel=0.01)

    # a candidate that breaks correctness: red gate -> drop, no timing, the gate's exit code
    def run(inputs, config, mode):
        out = gk.t_scale(inputs, config, mode)
        if config["BLOCK"] == 128:
            out["y"] = out["y"] * 1.5
        return out

    gk.install(monkeypatch, dataclasses.replace(gk.SPEC, run=run))
    drop = _round(ws, {"BLOCK": "128"}, hypothesis="bigger blocks")
    assert drop.record.verdict == "drop" and drop.record.timing is None and drop.exit_code == 1
    assert drop.record.gate["failed_stage"] == "correctness" and drop.record.summary["speed"] is None
    assert [r.verdict for r in rounds.load_rounds(ws)] == ["keep", "revert", "drop"]
    # issue 28: the record carries the failing checks' own lines (each tensor out of tolerance), not only a summary
    assert drop.record.gate["error"] and "tiny/fwd:y:" in drop.record.gate["error"]
    # a reprofile now profiles the best kept configuration, round 1's, never the dropped "bigger blocks"
    from ascendopt.rounds.context import RoundContext
    from ascendopt.rounds.reprofile import profiled_state

    state = profiled_state(RoundContext.load(ws))
    assert state["round"] == 1 and "bigger blocks" not in state["text"] and "EXTRA=0" in state["text"]


def test_stop_refuses_without_force_and_bad_sets(ws):
    with pytest.raises(UsageError, match="no tunable 'NOPE'.*tunables: BLOCK, EXTRA"):
        _round(ws, {"NOPE": "1"})
    with pytest.raises(UsageError, match=r"EXTRA=7: out of range.*valid values: 0, 5, 50"):
        _round(ws, {"EXTRA": "7"})
    with pytest.raises(UsageError, match="changes nothing"):
        _round(ws, {"EXTRA": "50"})
    for value in ("32", "128", "32"):  # three non-keep rounds in a row
        _round(ws, {"BLOCK": value}, hypothesis=f"block {value}")
    with pytest.raises(UsageError, match="stop criterion 'stall' reached: 3 consecutive rounds without a keep"):
        _round(ws, {"EXTRA": "0"})
    assert len(rounds.load_rounds(ws)) == 3  # the refusal wrote nothing
    forced = _round(ws, {"EXTRA": "0"}, force=True)
    assert forced.record.number == 4 and forced.record.verdict == "keep"
    fifth = _round(ws, {"BLOCK": "128"}, hypothesis="block 128 on the new best")
    assert fifth.record.stop.stop and fifth.record.stop.criterion == "max_rounds"  # frozen max_rounds=5
    assert not fifth.record.summary["another_round"]
    with pytest.raises(UsageError, match="stop criterion 'max_rounds' reached: 5 rounds reached the iteration cap"):
        _round(ws, {"BLOCK": "32"})


def test_auto_screens_every_candidate_then_confirms_the_fastest_as_rounds(ws):
    """Stage 1 screens the whole 9-configuration space (no round recorded for it); stage 2 turns the two
    fastest screened candidates into gated rounds, and only those can be kept."""
    result = round_auto.run_auto(ws, hypothesis="auto", pairs=12, timer=gk.virtual_clock)
    screening = result["screening"]
    assert screening["stopped"] == "covered" and screening["covered"] == screening["total"] == 9
    assert screening["fresh"] == 9 and all(r["smoke"] == "pass" for r in screening["rows"])
    # the screening's order is the planted cost: EXTRA=0 fastest, EXTRA=50 (the start) slowest
    by_extra = {}
    for r in screening["rows"]:
        by_extra.setdefault(r["config"]["EXTRA"], []).append(r["ms"])
    assert max(by_extra[0]) < min(by_extra[5]) and max(by_extra[5]) < min(by_extra[50])
    assert screening["start_ms"] == pytest.approx(1.5 * min(by_extra[0]), rel=0.03)
    recs = rounds.load_rounds(ws)
    assert [r.number for r in recs] == result["rounds"] == [c["round"] for c in result["confirmed"]]
    assert len(recs) == round_auto.DEFAULT_CONFIRM
    assert all(c["config"]["EXTRA"] == 0 for c in result["confirmed"])  # the two fastest screened
    assert recs[0].verdict == "keep" and result["best"]["EXTRA"] == 0
    assert all(r.command.endswith("--auto") for r in recs) and "screened #1 of 9" in recs[0].hypothesis
    assert (ws.root / "screen-cache.json").exists()


def test_auto_screening_stops_at_its_time_budget_and_says_what_it_covered(ws):
    """A wall clock that advances 1 s per reading: --budget-s 4 leaves room for a few screenings; the
    confirmation still runs on what was covered, and the progress callbacks saw every screened candidate."""
    ticks = iter(range(10_000))
    space, seen = [], []
    result = round_auto.run_auto(ws, hypothesis="auto", pairs=12, timer=gk.virtual_clock, budget_s=4,
                                 wall_clock=lambda: float(next(ticks)), on_space=space.append,
                                 on_screened=lambda row, run: seen.append((run.covered, run.best.ms)))
    screening = result["screening"]
    assert screening["stopped"] == "time" and 1 <= screening["covered"] < screening["total"] == 9
    assert space == [9] and [n for n, _ in seen] == list(range(1, screening["covered"] + 1))
    assert seen[-1][1] == min(r["ms"] for r in screening["rows"])  # the best so far, as the progress bar shows it
    assert len(result["rounds"]) <= round_auto.DEFAULT_CONFIRM and screening["budget_s"] == 4
    assert all(r.command.endswith("--auto --budget-s 4") for r in rounds.load_rounds(ws))


def test_auto_screening_smoke_check_screens_out_a_wrong_candidate(ws, monkeypatch):
    """A candidate whose outputs are wrong, or left unwritten (NaN-poisoned), on the smoke shape is never
    timed and never confirmed, whatever its speed."""
    def run(inputs, config, mode):
        if config == {"BLOCK": 128, "EXTRA": 5}:
            return gk._run(inputs, config, mode, skip_last=True)  # the last block of y is never stored
        out = gk.t_scale(inputs, config, mode)
        if config == {"BLOCK": 32, "EXTRA": 0}:
            out["y"] = out["y"] * 1.5
        return out

    gk.install(monkeypatch, dataclasses.replace(gk.SPEC, run=run))
    result = round_auto.run_auto(ws, hypothesis="auto", pairs=12, timer=gk.virtual_clock, confirm=3)
    (wrong,) = [r for r in result["screening"]["rows"] if r["config"] == {"BLOCK": 32, "EXTRA": 0}]
    assert wrong["ms"] is None and wrong["smoke"] == "fail" and wrong["note"].startswith("wrong: y")
    (unwritten,) = [r for r in result["screening"]["rows"] if r["config"] == {"BLOCK": 128, "EXTRA": 5}]
    assert unwritten["ms"] is None and unwritten["smoke"] == "fail" and "NaN/inf (unwritten" in unwritten["note"]
    assert {"BLOCK": 32, "EXTRA": 0} not in [c["config"] for c in result["confirmed"]]
    assert len(result["confirmed"]) == 2  # only two EXTRA=0 candidates are left within reach of the best


def test_auto_stops_at_a_device_fault_and_remembers_the_configuration(ws, monkeypatch):
    """BLOCK=64,EXTRA=5 (the probe's first move from the frozen EXTRA=50) breaks the device while screened:
    --auto stops (DeviceFault, exit 5) and the screening cache records the configuration as failed, so the
    next --auto run (a fresh process, same start) skips it and goes on."""
    import json

    from ascendopt.errors import DeviceFault

    launched = []

    def run(inputs, config, mode):
        launched.append(dict(config))
        if config == {"BLOCK": 64, "EXTRA": 5}:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return gk._run(inputs, config, mode)

    gk.install(monkeypatch, dataclasses.replace(gk.SPEC, run=run))
    with pytest.raises(DeviceFault, match="broke the device") as info:
        round_auto.run_auto(ws, hypothesis="auto", budget=4, pairs=12, timer=gk.virtual_clock)
    assert info.value.exit_code == 5 and info.value.config == {"BLOCK": 64, "EXTRA": 5}
    assert rounds.load_rounds(ws) == []  # screening records no round
    (cached,) = json.loads((ws.root / "screen-cache.json").read_text())["entries"].values()
    assert cached["BLOCK=64,EXTRA=5"]["ms"] is None and "device fault" in cached["BLOCK=64,EXTRA=5"]["note"]
    launched.clear()
    result = round_auto.run_auto(ws, hypothesis="auto again", budget=4, pairs=12, timer=gk.virtual_clock)
    assert launched and {"BLOCK": 64, "EXTRA": 5} not in launched
    (row,) = [r for r in result["screening"]["rows"] if r["config"] == {"BLOCK": 64, "EXTRA": 5}]
    assert row["cached"] and row["smoke"] == "device fault" and row["ms"] is None


def test_parse_sets():
    assert round_run.parse_sets(["a=1", "b=2,c=3"]) == {"a": "1", "b": "2", "c": "3"}
    with pytest.raises(UsageError, match="expected NAME=VALUE"):
        round_run.parse_sets(["a"])
    with pytest.raises(UsageError, match="given twice"):
        round_run.parse_sets(["a=1", "a=2"])


def test_own_code_round_measures_the_edited_tree(tmp_path, monkeypatch, cli):
    """Own code: the gate times the frozen commit (git worktree) against the edited working tree."""

    from _own_code import commit_repo, sleep_repo_files

    root = commit_repo(tmp_path / "repo", sleep_repo_files(0.004))
    monkeypatch.chdir(root)
    code, _, err = cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                       "my_op_kernel", "-w", str(root / ".ascendopt"))
    assert code == 0, err
    code, _, err = cli("optimize-round", "-w", str(root / ".ascendopt"), "--hypothesis", "x", "--set", "A=1")
    assert code == 2 and "bundled kernels only" in err
    (root / "op.py").write_text((root / "op.py").read_text().replace("DELAY_S = 0.004", "DELAY_S = 0.002"))
    code, out, err = cli("optimize-round", "-w", str(root / ".ascendopt"), "--hypothesis", "halve the work",
                         "--pairs", "12", "--json")
    assert code == 0, err[-2000:]
    rec = json_payload(out)
    assert rec["change"]["kind"] == "code" and "op.py" in rec["change"]["diff_stat"]
    assert rec["verdict"] == "keep" and rec["timing"]["ratio_vs_baseline"] < 0.8
    assert rec["profiles"] and rec["summary"]["duration_us"]["after"] > 0
    # slower than the frozen commit: the gate's performance stage is red, which for a round is the
    # bench's verdict (revert), not a red gate (drop)
    (root / "op.py").write_text((root / "op.py").read_text().replace("DELAY_S = 0.002", "DELAY_S = 0.008"))
    code, out, err = cli("optimize-round", "-w", str(root / ".ascendopt"), "--hypothesis", "more work", "--pairs",
                         "12", "--json")
    assert code == 0, err[-2000:]
    rec = json_payload(out)
    assert rec["gate"]["passed"] and rec["verdict"] == "revert" and rec["timing"]["vs_baseline"] == "slower"


def test_auto_cli_prints_the_screening_table_and_the_confirmation_rounds(ws, cli, monkeypatch):
    # the planted cost on the virtual clock ranks the candidates: a loaded host cannot reorder them
    monkeypatch.setattr(round_auto, "run_auto", functools.partial(round_auto.run_auto, timer=gk.virtual_clock))
    code, out, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "search", "--auto", "--budget", "4",
                         "--confirm", "1", "--pairs", "12")
    assert code == 0, err[-2000:]
    recs = rounds.load_rounds(ws)
    assert len(recs) == 1 and "confirmation: 1 round(s)" in out
    assert "screening on tiny: 4 of 9 candidates (4 screened now, 0 cached)" in " ".join(out.split())
    assert "stopped: --budget reached" in " ".join(out.split())
    assert "best configuration: BLOCK=" in out and "screen-cache.json" in out
    assert recs[0].command.endswith("--auto --budget 4 --confirm 1")
    for option, value in (("--budget", "2"), ("--budget-s", "5"), ("--confirm", "1")):
        code, _, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "x", option, value)
        assert code == 2 and f"{option} applies to --auto only" in err
    for option, value, why in (("--budget", "0", "must be >= 1"), ("--budget-s", "0", "must be > 0 seconds"),
                               ("--confirm", "-1", "must be >= 0")):
        code, _, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "x", "--auto", option, value)
        assert code == 2 and f"{option} {value}: {why}" in err
    code, _, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "x", "--set", "EXTRA=0", "--pairs", "11")
    assert code == 2 and "--pairs 11: at least 12 interleaved pairs" in err


def test_auto_cli_json_is_the_envelope_with_next_steps(ws, cli):
    code, out, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "search", "--auto", "--budget", "1",
                         "--pairs", "12", "--json")
    assert code == 0, err[-2000:]
    env = json_envelope(out)  # validated against the optimize-round schema (the --auto form)
    assert env["data"]["screening"]["budget"] == 1 and len(env["data"]["rounds"]) == len(rounds.load_rounds(ws))
    assert env["next"] == [f"ascendopt reprofile -w {ws.root}", f"ascendopt report -w {ws.root}"]


def test_a_change_that_resolves_to_the_same_tiles_is_flagged(capsys, tmp_path):
    from types import SimpleNamespace

    from ascendopt import kernels
    from ascendopt.contract.model import ShapeCase
    from ascendopt.rounds.context import RoundContext

    spec = kernels.get("rms_norm")
    tiny = ShapeCase("tiny", dict(spec.shapes["tiny"].dims))
    contract = SimpleNamespace(is_kernel=True, workload=SimpleNamespace(kernel="rms_norm", config={}, shapes=(tiny,),
                                                                        dtype="fp32", mode="fwd"))
    auto_rows = spec.ub_model(tiny.dims, spec.config({}), "fp32")[0].tile["BR"]  # what block_rows=0 runs
    other = 16 if auto_rows != 16 else 8
    ctx = RoundContext(Workspace(tmp_path), contract)  # no rounds yet: the best is the baseline
    round_run.plan_change(ctx, {"block_rows": str(auto_rows)})
    assert "resolves to the same tiles as the best so far" in capsys.readouterr().err
    plan = round_run.plan_change(ctx, {"block_rows": str(other)})
    assert plan.changed == {"block_rows": other} and "same tiles" not in capsys.readouterr().err
