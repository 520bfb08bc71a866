"""Profiles belong to the loop: freeze profiles the baseline into the workspace's profiles/ (round 1's
"before"), `ascendopt collect` inside a workspace writes there, and reprofile's hint is a command that works.

Bundled kernel ``t_scale`` on the CPU interpreter with the gate's virtual clock (tests/_gate_kernels.py);
the own-code side (the first round's "before" from freeze) is in test_round_own_timing.py.
"""

import shlex
from pathlib import Path

import pytest

import _gate_kernels as gk
from ascendopt.collect.metadata import FILENAME
from ascendopt.freeze.task import freeze_kernel
from ascendopt.rounds import profiles as rp
from ascendopt.rounds import run as round_run
from ascendopt.rounds.context import RoundContext
from ascendopt.workspace import Workspace, read_yaml

FREEZE = ("freeze", "--kernel", "t_scale", "--shapes", "tiny", "--dtype", "fp32", "--mode", "fwd", "--set",
          "EXTRA=50")


@pytest.fixture
def kernel(monkeypatch, tmp_path):
    gk.install(monkeypatch)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_freeze_profiles_the_baseline_and_the_first_round_compares_with_it(kernel):
    ws = Workspace(kernel / ".ascendopt")
    freeze_kernel(ws, kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", config={"EXTRA": 50},
                  metric_groups=["pipe", "none"])
    baseline = rp.baseline_profiles(RoundContext.load(ws))
    assert len(baseline) == 2 and all(Path(p).parent == ws.profiles_dir for p in baseline)
    metas = [read_yaml(Path(p) / FILENAME) for p in baseline]
    assert [m["metric_group"] for m in metas] == ["PipeUtilization", "none"]
    assert {m["name"] for m in metas} == {"baseline"} and metas[0]["workload"]["config"] == {"BLOCK": 64, "EXTRA": 50}

    rec = round_run.run_round(ws, hypothesis="vector-bound: drop the planted extra pass", sets={"EXTRA": "0"},
                              pairs=12, timer=gk.virtual_clock).record
    assert rec.profiles_before == baseline  # freeze's profile, not a second one collected by the round
    # duration is the one metric the cpu profiler has: "before" is measured, not "not collected"
    assert rec.summary["duration_us"]["before"] > 0 and rec.summary["duration_us"]["after"] > 0


def test_a_refreeze_does_not_take_the_old_contracts_baseline_profile(kernel, monkeypatch):
    ws = Workspace(kernel / ".ascendopt")
    freeze_kernel(ws, kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", config={"EXTRA": 50})
    assert rp.baseline_profiles(RoundContext.load(ws))
    # a later second: the new contract's created_at is after the old profile's time
    import time

    time.sleep(1.1)
    freeze_kernel(ws, kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd", force=True, profile=False)
    assert rp.baseline_profiles(RoundContext.load(ws)) == []


def test_a_failing_baseline_profile_warns_and_the_freeze_stands(kernel, monkeypatch, capsys):
    from ascendopt.errors import EnvironmentProblem

    def broken(*args, **kwargs):
        raise EnvironmentProblem("profiler unavailable")

    monkeypatch.setattr(rp, "collect_profiles", broken)
    ws = Workspace(kernel / ".ascendopt")
    contract = freeze_kernel(ws, kernel="t_scale", shapes=["tiny"], dtype="fp32", mode="fwd")
    assert ws.contract_path.is_file() and contract.op == "t_scale"
    err = " ".join(capsys.readouterr().err.split())
    assert "warning: freeze: the baseline profile was not collected (profiler unavailable); round 1 has no " \
           "'before' profile unless one is collected: `ascendopt collect --kernel t_scale" in err
    assert f"-w {ws.root}`" in err


def test_no_profile_then_reprofile_names_a_collect_command_that_works(kernel, cli):
    ws = kernel / "ws"
    code, _, err = cli(*FREEZE, "--no-profile", "-w", str(ws))
    assert code == 0, err
    assert not (ws / "profiles").exists()
    code, _, err = cli("reprofile", "-w", str(ws))
    flat = " ".join(err.split())
    assert code == 2 and f"{ws / 'profiles'}: no previous profile to compare with" in flat
    command = ("ascendopt collect --kernel t_scale --shapes B=2,T=10,D=32 --dtype fp32 --mode fwd --set BLOCK=64 "
               f"--set EXTRA=50 --aic-metrics PipeUtilization -w {ws}")
    assert f"profile the workload into it first: `{command}`" in flat
    assert f"`ascendopt optimize-round -w {ws} --hypothesis ...`" in flat

    code, out, err = cli(*shlex.split(command)[1:])
    assert code == 0, err
    assert f"collect: writing into the workspace's {ws / 'profiles'}" in " ".join(err.split())
    (folder,) = [Path(line) for line in out.split()]
    assert folder.parent == ws / "profiles"
    assert read_yaml(folder / FILENAME)["workload"]["config"] == {"BLOCK": 64, "EXTRA": 50}
    code, _, err = cli("reprofile", "-w", str(ws))
    assert code == 0, err


def test_collect_inside_a_workspace_writes_under_its_profiles(kernel, cli, tmp_path):
    code, out, err = cli("collect", "--kernel", "t_scale", "--shape", "tiny", "--dtype", "fp32")
    assert code == 0, err  # no workspace here: the plain default
    assert Path(out.split()[0]).parent == (tmp_path / "npu_prof").resolve() and "workspace" not in err

    code, _, err = cli(*FREEZE, "--no-profile")  # ./.ascendopt holds a contract now
    assert code == 0, err
    code, out, err = cli("collect", "--kernel", "t_scale", "--shape", "tiny", "--dtype", "fp32")
    assert code == 0, err
    assert Path(out.split()[0]).parent == tmp_path / ".ascendopt" / "profiles"
    assert "collect: writing into the workspace's" in err
    # what the loop reads: the newest profile of the workspace
    assert rp.newest_profiles(Workspace(tmp_path / ".ascendopt")) == [out.split()[0]]

    code, out, err = cli("collect", "--kernel", "t_scale", "--shape", "tiny", "--dtype", "fp32", "--out-dir",
                         str(tmp_path / "elsewhere"))
    assert code == 0, err  # an explicit --out-dir still wins
    assert Path(out.split()[0]).parent == (tmp_path / "elsewhere").resolve() and "workspace" not in err
