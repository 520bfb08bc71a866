"""A contract's ledger: only its own rounds count; own-code rounds name their direction and warn on an
unchanged tree and an uncommitted keep; --set on own code is refused first.

Bundled-kernel rounds use the gate's test kernel with its virtual clock (tests/_gate_kernels.py);
own-code rounds a small git repository made once per module and copied for each test.
"""

import shutil

import pytest

import _gate_kernels as gk
from _cli_json import json_payload
from _own_code import (
    frozen_kernel_workspace,
    frozen_own_repo,
    kernel_round,
    sleep_repo_files,
    working_copy,
)
from _own_code import git as _git
from ascendopt.errors import UsageError
from ascendopt.freeze.task import freeze_kernel
from ascendopt.rounds import auto as round_auto
from ascendopt.rounds import records as rounds
from ascendopt.rounds import run as round_run
from ascendopt.rounds.context import RoundContext
from ascendopt.rounds.records import RoundRecord, StopDecision
from ascendopt.workspace import Workspace, read_yaml, write_yaml

FREEZE = dict(kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", config={"EXTRA": 50}, max_rounds=8)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    return frozen_kernel_workspace(tmp_path, monkeypatch, **FREEZE)


_round = kernel_round


def test_rounds_of_another_contract_are_ignored_with_a_warning(ws, capsys):
    _round(ws, {"EXTRA": "0"})
    _round(ws, {"BLOCK": "32"}, hypothesis="smaller blocks")
    freeze_kernel(ws, **FREEZE, force=True)
    (archive,) = ws.archive_dir.iterdir()
    ws.rounds_dir.mkdir()
    shutil.copy(archive / "rounds" / "0001.yaml", ws.round_path(1))  # copied back by hand
    # a round recorded before rounds carried their contract's digest, older than this contract's freeze
    legacy = {k: v for k, v in read_yaml(archive / "rounds" / "0002.yaml").items() if k != "contract_digest"}
    write_yaml(ws.round_path(2), {**legacy, "created_at": "2000-01-01T00:00:00+00:00"})
    capsys.readouterr()

    ctx = RoundContext.load(ws)
    assert ctx.records == () and ctx.best_round is None and ctx.stop_decision().reason == "no rounds yet"
    err = capsys.readouterr().err
    assert f"{ws.rounds_dir}: 0001.yaml, 0002.yaml: recorded under another contract (not digest " \
           f"{ctx.contract_digest[:12]}); ignored" in err and len(err.strip().splitlines()) == 1
    new = _round(ws, {"BLOCK": "32"}, hypothesis="smaller blocks")
    assert new.number == 3 and new.contract_digest == ctx.contract_digest  # never overwrites a file
    assert [r.number for r in RoundContext.load(ws).records] == [3]

    # a round without the digest recorded after this contract's freeze is this contract's
    write_yaml(ws.round_path(4), {**legacy, "number": 4, "created_at": "2999-01-01T00:00:00+00:00"})
    assert [r.number for r in RoundContext.load(ws).records] == [3, 4]


def test_the_screening_cache_outlives_a_refreeze_but_not_a_kernel_edit(ws, monkeypatch):
    """Screening numbers depend on the kernel source, shape, dtype, mode and device, not on the contract:
    cached entries cost no budget, survive `freeze --force` (rounds do not), and a kernel edit (another
    source hash) makes them unusable."""
    from ascendopt.tune import search as tune

    first = round_auto.run_auto(ws, hypothesis="auto", budget=2, confirm=0, pairs=12, timer=gk.virtual_clock)
    assert first["screening"]["fresh"] == 2 and first["rounds"] == [] and rounds.load_rounds(ws) == []
    again = round_auto.run_auto(ws, hypothesis="auto", budget=2, confirm=0, pairs=12, timer=gk.virtual_clock)
    cached = [r["config"] for r in again["screening"]["rows"] if r["cached"]]
    assert cached == [r["config"] for r in first["screening"]["rows"]]  # free: the budget screened 2 more
    assert again["screening"]["fresh"] == 2 and again["screening"]["covered"] == 4

    freeze_kernel(ws, **FREEZE, force=True)
    (archive,) = ws.archive_dir.iterdir()
    assert ws.screen_cache_path.exists() and not (archive / "screen-cache.json").exists()
    fresh = round_auto.run_auto(ws, hypothesis="auto", budget=1, confirm=1, pairs=12, timer=gk.virtual_clock)
    assert sum(r["cached"] for r in fresh["screening"]["rows"]) == 4
    assert [r.number for r in RoundContext.load(ws).records] == fresh["rounds"] == [1]

    monkeypatch.setattr(tune, "source_hash", lambda spec: "0" * 16)
    edited = round_auto.run_auto(ws, hypothesis="auto", budget=2, confirm=0, pairs=12, timer=gk.virtual_clock,
                                 force=True)
    assert not any(r["cached"] for r in edited["screening"]["rows"]) and edited["screening"]["fresh"] == 2


def test_direction_names(capsys):
    plan = round_run.Plan({"BT": 16}, {"BT": 16}, {"BT": 32}, {"BT": 32})
    assert round_run.round_direction(None, "tiling: larger row tile", None) == "tiling"
    assert round_run.round_direction(None, "  v2.load-order: reorder", None) == "v2.load-order"
    assert round_run.round_direction("pipeline", "tiling: larger row tile", None) == "pipeline"
    assert round_run.round_direction(None, "tiling: larger", plan) == "BT"  # a bundled kernel: its tunables
    assert round_run.round_direction("tiling", "x", plan) == "tiling"  # ... unless named explicitly
    assert capsys.readouterr().err == ""
    for text in ("halve the work", "see http://example.org", "tiling:no space"):
        assert round_run.round_direction(None, text, None) == "code"
    assert "hint: this round's direction is 'code': pass --direction NAME or start the hypothesis with 'NAME: '" \
           in capsys.readouterr().err
    assert round_run.check_direction("tile_v2.1-a") == "tile_v2.1-a"
    for bad in ("two words", "", "a/b", "tiling:"):
        with pytest.raises(UsageError, match="--direction .*: expected one word of letters, digits") as info:
            round_run.check_direction(bad)
        assert info.value.exit_code == 2


def test_the_direction_option(ws, cli):
    code, _, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "x", "--set", "EXTRA=0",
                       "--direction", "two words")
    assert code == 2 and "--direction 'two words': expected one word of letters, digits" in err
    code, _, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "x", "--auto", "--direction", "tiling")
    assert code == 2 and "--auto and --direction exclude each other" in err
    assert ws.round_numbers() == []
    # a bundled kernel's round is named by its tunables unless --direction names the strategy
    code, out, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "drop the extra pass", "--set",
                         "EXTRA=0", "--direction", "passes", "--pairs", "12", "--json")
    assert code == 0, err[-2000:]
    assert json_payload(out)["direction"] == "passes" and rounds.load_rounds(ws)[0].direction == "passes"


# -- own code ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def own_frozen(tmp_path_factory):
    """A tiny own-code repository (op + test + workload), committed and frozen once; its workspace is
    inside the repository and not ignored by git, as a user's often is."""
    return frozen_own_repo(tmp_path_factory.mktemp("own") / "repo", sleep_repo_files(0.004))


@pytest.fixture
def repo(own_frozen, tmp_path, monkeypatch):
    copy = working_copy(own_frozen, tmp_path, monkeypatch)
    return copy


def _recorded(ws, number, direction, verdict, ratio=0.5, tree_digest=None):
    """A round of this contract as ``record_round`` writes it (an earlier round of the ledger)."""
    case = {"case": "bench.py", "candidate": {"median_ms": 4.0 * ratio, "p20_ms": 1.9, "p80_ms": 2.1, "cv": 0.01,
                                              "n": 12}}
    timing = {"cases": [case], "ratio_vs_baseline": ratio, "ratio_vs_best": ratio,
              "vs_best": "faster" if verdict == "keep" else "same", "vs_baseline": "faster"}
    rec = RoundRecord(number=number, hypothesis=f"{direction}: an earlier round", direction=direction,
                      change={"kind": "code", "commit": None, "diff_stat": "", "tree_digest": tree_digest},
                      gate={"passed": True, "exit_code": 0}, verdict=verdict, stop=StopDecision(False, None, "go"),
                      environment="Device: cpu", timing=timing, contract_digest=RoundContext.load(ws).contract_digest)
    rounds.save_round(ws, rec)


def test_set_on_own_code_is_refused_before_anything_runs(repo, cli, monkeypatch):
    ws = Workspace(repo / ".ascendopt")
    for n in (1, 2, 3):  # three rounds without a keep: the stall criterion is reached
        _recorded(ws, n, f"d{n}", "revert")

    def no_gate(*args, **kwargs):
        raise AssertionError("the gate ran")

    monkeypatch.setattr("ascendopt.gate.stages.run_gate", no_gate)
    code, _, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "x", "--set", "A=1", "--force")
    assert code == 2 and ("--set applies to bundled kernels only: own code is changed by editing the working tree"
                          in err)
    code, _, err = cli("optimize-round", "-w", str(ws.root), "--hypothesis", "x", "--set", "A=1")
    assert code == 2 and "--set applies to bundled kernels only" in err and "stop criterion" not in err
    assert ws.round_numbers() == [1, 2, 3]


def test_own_code_round_names_its_direction_and_warns_on_an_unchanged_tree(repo, capsys):
    """Round 1 (direction a) was kept; round 2 named none ("code") and measured the tree as it is now
    (its tree digest). Round 3, --direction c, measures that same committed tree: a revert (round 1's
    record names no commit, so the best cannot be timed and nothing is kept), and the third named
    direction, so the directions criterion stops the loop; it warns that nothing changed since round 2
    and keeps the warning in its notes."""
    from ascendopt.rounds import tree as rtree

    ws = Workspace(repo / ".ascendopt")
    now = rtree.tree_state(repo, exclude=[ws.root])
    _recorded(ws, 1, "a", "keep")
    _recorded(ws, 2, "code", "revert", tree_digest=now.digest)
    capsys.readouterr()

    third = round_run.run_round(ws, hypothesis="overlap the loads", direction="c", pairs=12, reprofile=False).record
    assert third.direction == "c" and third.verdict == "revert" and third.command.endswith("--direction c")
    assert third.stop.stop and third.stop.criterion == "directions"
    assert "(a: round 1; code: round 2; c: round 3)" in third.stop.reason
    assert third.change["tree_digest"] == now.digest and third.change["committed"] is True
    warning = (f"the working tree is unchanged since round 2 (the last round, revert; tree digest "
               f"{now.digest[:12]}): this round measures the same code again")
    assert warning in capsys.readouterr().err
    assert len(third.notes) == 3 and third.notes[0].startswith(warning)
    assert third.notes[1].startswith("best not reproducible: round 1: its record has no tree digest")
    assert third.notes[2].startswith("not profiled (--no-reprofile)")  # reprofile=False
    assert read_yaml(ws.round_path(3))["notes"] == third.notes


def test_tree_state_digest_and_the_round_snapshot(tmp_path):
    """The digest reads the disk (workspace and __pycache__ left out); a round's snapshot stores exactly that
    tree on its private ref without touching the user's index or branch, and says whether HEAD holds it."""
    import subprocess

    from ascendopt.rounds import tree as rtree

    root = tmp_path / "repo"
    root.mkdir()
    (root / "op.py").write_text("A = 1\n")
    (root / "old.py").write_text("gone soon\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "baseline")
    ws_root = root / ".ascendopt"
    clean = rtree.tree_state(root, exclude=[ws_root])
    assert clean.commit and clean.digest

    (ws_root / "rounds").mkdir(parents=True)
    (ws_root / "rounds" / "0001.yaml").write_text("schema: 1\n")  # the workspace is not the code
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "op.cpython-312.pyc").write_bytes(b"\0")
    assert rtree.tree_state(root, exclude=[ws_root]) == clean
    first = rtree.round_snapshot(root, ws_root, 1)
    assert first.digest == clean.digest and rtree.change_record(root, first, ws_root)["committed"] is True

    (root / "op.py").write_text("A = 2\n")
    (root / "new.py").write_text("B = 1\n")
    (root / "old.py").unlink()
    edited = rtree.tree_state(root, exclude=[ws_root])
    assert edited.digest != clean.digest and clean.uncommitted == ()
    assert edited.uncommitted == ("new.py", "old.py", "op.py")  # read from disk, not from the index
    second = rtree.round_snapshot(root, ws_root, 2)
    change = rtree.change_record(root, second, ws_root)
    assert second.digest == edited.digest and change["committed"] is False
    assert change["snapshot"] == second.snapshot.commit and change["commit"] == clean.commit
    assert "new.py" in change["diff_stat"] and "old.py" in change["diff_stat"]
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", "refs/ascendopt/rounds/0002"], cwd=root,
                            capture_output=True, text=True, check=True).stdout.split()
    assert listed == ["new.py", "op.py"]  # the measured tree: no workspace, no __pycache__, old.py deleted
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    assert sorted(status.splitlines()) == [" D old.py", " M op.py", "?? .ascendopt/", "?? __pycache__/", "?? new.py"]

    _git(root, "add", "-A", "--", "op.py", "new.py", "old.py")
    _git(root, "commit", "-q", "-m", "keep")
    committed = rtree.tree_state(root, exclude=[ws_root])
    # the same content committed: the same tree digest (no "new" code), and HEAD holds the snapshot
    assert committed.digest == edited.digest and committed.commit != clean.commit
    third = rtree.round_snapshot(root, ws_root, 3)
    assert third.snapshot.tree == second.snapshot.tree and rtree.change_record(root, third, ws_root)["committed"]
    (tmp_path / "plain").mkdir()
    assert rtree.tree_state(tmp_path / "plain") == rtree.TreeState(None, None)  # not a git repository
