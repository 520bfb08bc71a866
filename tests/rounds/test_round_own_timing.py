"""Own code: a round times baseline (the frozen commit), best (the best kept round's commit) and candidate
(the working tree) interleaved in three child processes, and keeps only on a measured gain over the best;
the baseline profiled at freeze is round 1's "before".

The workload sleeps ``DELAY_S`` (set in op.py per test step), so the three sides differ by 2x steps that
no machine load turns around; equal delays are "same" (the bands of sleep timings stay near 1-2 %).
"""

import shlex
from pathlib import Path

import pytest

from _own_code import SLEEP_OP, commit_repo, logged_bench, sleep_repo_files
from _own_code import git as _git
from _own_code import head as _head
from ascendopt.freeze.task import freeze_exec_file
from ascendopt.judge import bench
from ascendopt.rounds import profiles as rp
from ascendopt.rounds import records as rounds
from ascendopt.rounds import run as round_run
from ascendopt.rounds.context import RoundContext
from ascendopt.workspace import Workspace


def _delay(root, seconds: float) -> None:
    (root / "op.py").write_text(SLEEP_OP.format(delay=seconds))


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A committed own-code repository whose workload sleeps 8 ms, frozen with its baseline profile."""
    root = commit_repo(tmp_path / "repo", sleep_repo_files(0.008))
    monkeypatch.chdir(root)
    freeze_exec_file(Workspace(root / ".ascendopt"), exec_file="bench.py", tests=["tests/test_op.py"],
                     kernel_filter="my_op_kernel")
    return root


def _round(root, hypothesis, reprofile=False):
    return round_run.run_round(Workspace(root / ".ascendopt"), hypothesis=hypothesis, pairs=12,
                               reprofile=reprofile).record


def _consistent(timing) -> None:
    """Every field of a round's timing says what its samples say: the sides are the samples' summaries,
    each verdict is bench.decide on the paired samples, the ratios and aggregate verdicts follow."""
    ratios = []
    for case in timing["cases"]:
        samples = case["samples_ms"]
        calls = case["candidate"]["calls_per_sample"]
        best = samples.get("best", samples["baseline"])
        for side, src in (("baseline", samples["baseline"]), ("best", best), ("candidate", samples["candidate"])):
            assert case[side]["median_ms"] == pytest.approx(bench.summarize(src, calls).median_ms, rel=1e-4)
        for key, ref in (("vs_baseline", samples["baseline"]), ("vs_best", best)):
            again = bench.decide(ref, samples["candidate"], calls_per_sample=calls)
            assert case[key]["verdict"] == again.verdict and case[key]["ratio"] == pytest.approx(again.ratio, rel=1e-4)
        ratios.append(case["vs_best"]["ratio"])
    assert timing["ratio_vs_best"] == pytest.approx(rounds.geomean(ratios))
    assert timing["vs_best"] == timing["cases"][0]["vs_best"]["verdict"]  # one case: the aggregate is its verdict


def test_baseline_best_and_candidate_are_timed_interleaved_and_keep_needs_a_gain_over_the_best(repo, capsys, cli):
    ws = Workspace(repo / ".ascendopt")
    frozen = RoundContext.load(ws).contract.git["commit"]
    baseline_profile = rp.baseline_profiles(RoundContext.load(ws))
    assert baseline_profile  # freeze profiled the baseline into profiles/
    # the command reprofile's hint names works, and lands in the workspace; it does not displace the
    # baseline as round 1's "before"
    command = rp.collect_command(RoundContext.load(ws))
    assert command == (f"ascendopt collect --exec-file {repo.resolve() / 'bench.py'} --kernel-filter my_op_kernel "
                       f"--aic-metrics PipeUtilization -w {ws.root}")
    code, out, err = cli(*shlex.split(command)[1:])
    assert code == 0, err
    assert Path(out.split()[0]).parent == ws.profiles_dir

    # round 1, committed 2x gain: the best is still the baseline (no keep yet); the freeze profile is "before"
    _delay(repo, 0.004)
    _git(repo, "commit", "-q", "-am", "halve the sleep")
    first = _round(repo, "halve the sleep", reprofile=True)
    assert first.verdict == "keep" and first.change["committed"] is True
    assert first.timing["best"] == {"round": None, "commit": frozen} and "best" not in first.timing["cases"][0][
        "samples_ms"]
    assert first.profiles_before == baseline_profile and first.summary["duration_us"]["before"] > 0
    _consistent(first.timing)

    # round 2, the tree as kept: faster than the baseline, the same as the measured best -> revert
    second = _round(repo, "measure the kept tree again")
    case = second.timing["cases"][0]
    # the same code as the best: never kept; "same" where the host's noise allows a band that narrow, else
    # "inconclusive" (three sides on two loaded cores), never faster or slower
    assert second.verdict == "revert" and second.timing["vs_best"] in ("same", "inconclusive")
    assert second.timing["vs_baseline"] == "faster"
    assert second.timing["best"] == {"round": 1, "commit": first.change["snapshot"]}
    assert len(case["samples_ms"]["best"]) == len(case["samples_ms"]["candidate"])  # timed with the others
    assert case["best"]["median_ms"] < 0.75 * case["baseline"]["median_ms"]  # the best commit, not a baseline copy
    assert case["best"] != case["baseline"] and second.timing["ratio_vs_best"] == pytest.approx(1.0, abs=0.1)
    _consistent(second.timing)

    # round 3, faster than the best, left uncommitted: keep (its snapshot holds the state)
    _delay(repo, 0.003)  # every step stays under the 5x implausible bound vs the 8 ms baseline (round 4: 4x)
    third = _round(repo, "a third off again")
    assert third.verdict == "keep" and third.timing["vs_best"] == "faster" and third.change["committed"] is False
    assert third.timing["best"] == {"round": 1, "commit": first.change["snapshot"]}
    _consistent(third.timing)

    # round 4, still uncommitted and faster again: the best is round 3's snapshot, timed, no commit needed
    capsys.readouterr()
    _delay(repo, 0.002)
    fourth = _round(repo, "a third off once more, still uncommitted")
    assert fourth.timing["best"] == {"round": 3, "commit": third.change["snapshot"]}
    assert fourth.verdict == "keep" and fourth.timing["vs_best"] == "faster"
    assert fourth.timing["cases"][0]["best"]["median_ms"] < 0.75 * fourth.timing["cases"][0]["baseline"]["median_ms"]
    assert "not reproducible" not in capsys.readouterr().err and not [n for n in fourth.notes if "commit" in n]
    _consistent(fourth.timing)

    # the user commits the kept state after the round (as the README used to ask)
    _git(repo, "commit", "-q", "-am", "keep round 4")

    # status and report name the kept round's snapshot and the user's commit that holds it (HEAD, "keep
    # round 4"), never the parent the round started on (which holds the code before the change)
    from ascendopt.rounds.report import workspace_report
    from ascendopt.rounds.status import loop_status

    kept_commit = _head(repo)
    assert fourth.change["commit"] != kept_commit  # the round started on the parent
    best = loop_status(Workspace(repo / ".ascendopt"))["rounds"]["best"]
    assert best["number"] == 4 and best["commit"] == fourth.change["snapshot"] and best["user_commit"] == kept_commit
    report = workspace_report(Workspace(repo / ".ascendopt"), plot_name=None)
    assert report.best_commit == fourth.change["snapshot"] and report.best_user_commit == kept_commit
    assert f"snapshot {fourth.change['snapshot']}" in report.markdown
    assert f"your commit {kept_commit} holds the same files" in report.markdown


def test_a_round_loads_each_tree_once_for_its_gate_and_its_timing(tmp_path, monkeypatch):
    """The gate's workers are the timing's: an own-code round imports the workload once per tree it needs
    (the frozen commit and the working tree, no keep yet), not once for the gate and again for the timing.
    The workload's module code writes the folder it runs from to a log outside the repository."""
    loads = tmp_path / "loads.txt"
    bench = logged_bench(loads)
    root = commit_repo(tmp_path / "repo", {**sleep_repo_files(0.004), "bench.py": bench})
    monkeypatch.chdir(root)
    freeze_exec_file(Workspace(root / ".ascendopt"), exec_file="bench.py", tests=["tests/test_op.py"],
                     kernel_filter="my_op_kernel", profile=False, precheck=False)
    loads.unlink()
    _delay(root, 0.002)
    record = round_run.run_round(Workspace(root / ".ascendopt"), hypothesis="halve the sleep", pairs=8,
                                 reprofile=False, precheck=False).record
    assert record.gate["passed"] and record.timing is not None
    folders = loads.read_text().split()
    assert sorted(folders).count(str(root.resolve())) == 1, folders  # the working tree: gate and timing
    assert len(folders) == 2, folders  # and the frozen commit's folder, once



def test_no_reprofile_gates_and_times_the_round_without_profiles(repo, cli):
    """``optimize-round --no-reprofile``: the round is gated and timed, no profile is taken, and the record
    says so (with profiles the same round records both, as the test above shows)."""
    from _cli_json import json_payload

    _delay(repo, 0.004)
    before = sorted(Workspace(repo / ".ascendopt").profiles_dir.rglob("*"))
    code, out, err = cli("optimize-round", "--hypothesis", "halve the sleep", "--no-reprofile", "--pairs", "12",
                         "--json")
    assert code == 0, err
    rec = json_payload(out)
    assert rec["gate"]["passed"] and rec["timing"]["vs_baseline"] == "faster"
    assert rec["profiles"] == [] and rec["profiles_before"] == []
    assert any("not profiled (--no-reprofile)" in n for n in rec["notes"])
    assert sorted(Workspace(repo / ".ascendopt").profiles_dir.rglob("*")) == before


def test_pairs_taken_beyond_the_asked_ones_are_said(capsys):
    """A comparison too noisy to decide takes --pairs more rounds, up to 3x: the record's n is then above --pairs,
    and the console says why while it happens, with the counts."""
    import numpy as np

    from ascendopt import console
    from ascendopt.rounds import timing as rt

    class Noisy:
        calls = 1

        def __init__(self):
            self.rng = np.random.default_rng(3)
            self.samples = [[], []]

        def take(self, pairs, on_pair=None):
            for side in self.samples:  # a lognormal spread of 60 %: no band narrow enough to decide
                side.extend(float(x) for x in np.exp(self.rng.normal(0.0, 0.6, pairs)))
            return self.samples

    console.reset()
    samples = rt.take_decided(Noisy(), ["baseline", "candidate"], 12)
    assert len(samples["baseline"]) == len(samples["candidate"]) == 36
    err = capsys.readouterr().err
    assert "too wide to decide after 12 pairs: 12 more (at most 36 in all" in err
    assert "too wide to decide after 24 pairs: 12 more" in err
