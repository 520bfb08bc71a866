"""`freeze --force` starts a new ledger: the previous contract, its rounds and its tune cache are archived.

Rounds run on the gate's test kernel with its virtual clock (tests/_gate_kernels.py), profiles skipped.
"""

import pytest

from _own_code import frozen_kernel_workspace, kernel_round
from ascendopt.freeze.task import freeze_kernel
from ascendopt.rounds import report as rep
from ascendopt.rounds.context import RoundContext
from ascendopt.workspace import Workspace

FREEZE = dict(kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", config={"EXTRA": 50}, max_rounds=3)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    return frozen_kernel_workspace(tmp_path, monkeypatch, **FREEZE)


_round = kernel_round


def test_refreeze_archives_the_ledger_and_the_new_contract_starts_over(ws, cli):
    kept = _round(ws, {"EXTRA": "0"})
    assert kept.verdict == "keep", kept.gate
    _round(ws, {"BLOCK": "32"}, hypothesis="smaller blocks")
    ws.tune_cache_path.write_text('{"schema": 1, "entries": {}}')
    (ws.root / "report.md").write_text("old report")
    old_contract = ws.contract_path.read_bytes()

    code, _, err = cli("freeze", "--kernel", "t_scale", "--shapes", "tiny", "--dtype", "fp32", "--mode", "fwd",
                       "--set", "EXTRA=50", "--max-rounds", "3", "--force", "-w", str(ws.root))
    assert code == 0, err
    (archive,) = ws.archive_dir.iterdir()
    assert (f"freeze: the previous ledger is archived in {archive} (contract.yaml, report.md, rounds, "
            "tune-cache.json; 2 round(s)); rounds, stop criteria and the report start over at round 1") in err
    assert (archive / "contract.yaml").read_bytes() == old_contract
    assert sorted(p.name for p in (archive / "rounds").iterdir()) == ["0001.yaml", "0002.yaml"]
    assert (archive / "report.md").read_text() == "old report"
    assert ws.round_numbers() == [] and not ws.tune_cache_path.exists() and not (ws.root / "report.md").exists()
    assert ws.contract_path.read_bytes() != old_contract
    staging = [p.name for p in ws.root.iterdir() if p.name.startswith(".") and p.name != ".gitignore"]
    assert staging == []  # no staging folder left

    ctx = RoundContext.load(ws)
    assert ctx.records == () and ctx.best_round is None and ctx.stop_decision().reason == "no rounds yet"
    # the old ledger had 2 rounds of max_rounds=3: counted on, this round would reach the cap
    new = _round(ws, {"BLOCK": "32"}, hypothesis="smaller blocks on the new baseline")
    assert new.number == 1 and new.contract_digest == ctx.contract_digest
    assert not new.stop.stop and "2 round(s) left of max_rounds=3" in new.stop.reason
    report = rep.workspace_report(ws, plot_name=None)
    assert [r.number for r in report.records] == [1] and report.best_round is None and not report.stop.stop


def test_an_interrupted_refreeze_leaves_the_old_state_or_the_new_contract_and_the_archive(ws, monkeypatch, capsys):
    """The archive is a copy until the new contract is written: a freeze that fails before (here the
    write itself) leaves the old contract and its rounds in place; one interrupted after it leaves the
    new contract and the archive, and the old round files not yet removed are not the new ledger."""
    from ascendopt.freeze import task as freeze_mod

    _round(ws, {"EXTRA": "0"})
    before = ws.contract_path.read_bytes()
    save = freeze_mod.save

    def broken_save(w, contract):
        raise OSError("disk full")

    monkeypatch.setattr(freeze_mod, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        freeze_kernel(ws, **FREEZE, force=True)
    assert ws.contract_path.read_bytes() == before and [r.number for r in RoundContext.load(ws).records] == [1]

    monkeypatch.setattr(freeze_mod, "save", save)

    def interrupted(self, archive):
        raise KeyboardInterrupt

    monkeypatch.setattr(Workspace, "drop_archived", interrupted)
    with pytest.raises(KeyboardInterrupt):
        freeze_kernel(ws, **FREEZE, force=True)
    assert ws.contract_path.read_bytes() != before and ws.round_numbers() == [1]
    assert all((a / "rounds" / "0001.yaml").exists() for a in ws.archive_dir.iterdir())
    capsys.readouterr()
    assert RoundContext.load(ws).records == ()
    assert "0001.yaml: recorded under another contract" in capsys.readouterr().err
