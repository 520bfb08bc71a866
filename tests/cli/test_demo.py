"""`ascendopt demo` end to end on the CPU interpreter (tiny shape), then the commands that read its
workspace: report, optimize-round (refusals), reprofile. Real freeze, collect (child process and
torch.profiler), analyze, gate and profiles: nothing is faked."""

import os
import re
import subprocess
import sys

import pytest
import yaml

from _cli_json import json_payload
from ascendopt.rounds.records import load_rounds
from ascendopt.workspace import Workspace


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory):
    """The demo as a user runs it: a fresh process, a plain environment (no TRITON_INTERPRET, no
    backend chosen: auto-detection picks cpu here)."""
    root = tmp_path_factory.mktemp("demo") / "ws"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "ASCENDOPT_BACKEND")}
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "demo", "-w", str(root), "--json"], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, json_payload(proc.stdout)


def test_demo_runs_the_whole_loop(demo_ws):
    root, out = demo_ws
    ws = Workspace(root)
    assert out["backend"] == "cpu" and out["shape"] == "tiny" and out["kernel"] == "rms_norm"
    assert ws.contract_path.exists()
    recs = load_rounds(ws)
    assert len(recs) == 1 and recs[0].verdict in ("keep", "revert", "floor")
    r = recs[0]
    assert r.change["kind"] == "tunables" and list(r.change["set"]) == ["block_rows"]
    assert r.gate["passed"] and r.timing["cases"][0]["candidate"]["median_ms"] > 0
    assert r.profiles and r.profiles_before == out["profiles"]  # the collect step's profile is the "before"
    assert r.summary["target_kernel"] == "_rms_norm_fwd_kernel"
    assert r.summary["duration_us"]["before"] > 0 and r.summary["duration_us"]["after"] > 0
    # no counters on cpu: no counter rows at all (never 0, and no "not collected" for what none could request)
    assert r.summary["metrics"] == []
    per_call = r.summary["per_call"]  # the table's numbers: per profiled call of the workload
    assert per_call["device_us"]["before"] > 0 and per_call["device_us"]["after"] > 0
    assert per_call["launches"]["before"] >= 1 and per_call["calls"]["after"] >= 1
    assert r.metrics["kernels"] and r.metrics["kernels"][0]["name"]  # analysis.compare of before/after
    assert out["gate"]["failed_stage"] is None, out["gate"]  # a red gate says which stage and why
    # on the interpreter's wall clock the noise band may stay wider than max_band: inconclusive (exit 6)
    # is reported, never green; otherwise the gate is green
    gate = out["gate"]
    assert (gate["passed"] and gate["exit_code"] == 0 and gate["why"] is None) or \
        (not gate["passed"] and gate["exit_code"] == 6 and gate["why"].startswith("inconclusive: ")), gate
    assert out["round"]["verdict"] == r.verdict
    assert (root / "report.md").read_text().count("| 1 | block_rows=") == 1
    assert (root / "rounds.png").read_bytes()[:4] == b"\x89PNG"
    assert out["reprofile"]["profiles"] and not out["reprofile"]["stop"]["stop"]


def test_report_command(demo_ws, cli, tmp_path):
    root, _ = demo_ws
    md = tmp_path / "mr.md"
    code, out, err = cli("report", "-w", str(root), "--out", str(md), "--json")
    assert code == 0, err
    info = json_payload(out)
    assert info["rounds"] == 1 and info["markdown"] == str(md)
    text = md.read_text()
    assert "| Iter | Direction (one line) | Gate | Bench (median ms) | vs best | Status |" in text
    assert "![latency per round](rounds.png)" in text and (tmp_path / "rounds.png").exists()


def test_optimize_round_refusals_exit_2(demo_ws, cli):
    root, _ = demo_ws
    code, out, err = cli("optimize-round", "-w", str(root), "--hypothesis", "x", "--set", "nope=1")
    assert code == 2 and out == "" and "no tunable 'nope'" in err and "block_rows" in err
    code, _, err = cli("optimize-round", "-w", str(root), "--hypothesis", "x", "--set", "block_rows=3")
    assert code == 2 and "valid values: 0, 1, 2, 4, 8, 16, 32, 64, 128" in err
    code, _, err = cli("optimize-round", "-w", str(root), "--hypothesis", "x", "--auto", "--set", "block_rows=8")
    assert code == 2 and "exclude each other" in err
    code, _, err = cli("optimize-round", "-w", str(root / "missing"), "--hypothesis", "x")
    assert code == 2 and "no contract" in err
    assert len(load_rounds(Workspace(root))) == 1  # nothing was recorded


def test_round_record_is_plain_yaml(demo_ws):
    root, _ = demo_ws
    data = yaml.safe_load((root / "rounds" / "0001.yaml").read_text())
    assert data["schema"] == 1 and data["number"] == 1
    assert {"hypothesis", "change", "gate", "timing", "metrics", "verdict", "stop", "environment"} <= set(data)
    assert data["environment"].startswith("Device: cpu")


def test_reprofile_command(demo_ws, cli):
    root, _ = demo_ws
    code, out, err = cli("reprofile", "-w", str(root), "--json")
    assert code == 0, err[-2000:]
    res = json_payload(out)
    assert res["previous"] == load_rounds(Workspace(root))[0].profiles_before  # before the last change
    assert res["profiles"] and res["profiles"][0].startswith(str(root / "profiles" / "reprofile-0001"))
    assert res["summary"]["target_metric"]["name"] == "duration_us"  # no counters: judged on duration
    tm = res["summary"]["target_metric"]  # cpu: no counters, so not judged, but the direction is said
    assert tm["moved"] is None and "no hardware counters" in tm["judgement"]
    assert tm["direction"] == ("up" if tm["after"] > tm["before"] else "down" if tm["after"] < tm["before"] else "same")
    assert res["compare"]["kernels"] and res["stop"]["stop"] is False


def test_a_red_gate_in_the_demo_says_which_stage_and_why(cli, tmp_path, monkeypatch):
    from ascendopt.gate import stages as gate
    from ascendopt.gate.result import GateResult
    from ascendopt.judge.result import StageResult

    red = GateResult([StageResult("integrity", "pass", "frozen files unchanged"),
                      StageResult("performance", "fail", "regression: tiny/fwd +9.0% slower (planted)")])
    monkeypatch.setattr(gate, "run_gate", lambda *args, **kwargs: red)
    code, out, err = cli("demo", "-w", str(tmp_path / "ws"), "--json")
    assert code == 0, err  # a performance red is reported in the demo, not raised (1 and 3 are raised)
    assert json_payload(out)["gate"] == {"passed": False, "exit_code": 4, "failed_stage": "performance",
                                       "why": "regression: tiny/fwd +9.0% slower (planted)"}


def _markdown_tables(text):
    """Each markdown table of ``text`` as a list of rows (lists of cells); raises on a broken row."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            assert line.endswith("|"), f"a table row broken across lines: {line!r}"
            cells = [c.strip() for c in line[1:-1].split("|")]
            if current is None:
                current = []
                tables.append(current)
            current.append(cells)
        else:
            current = None
    for table in tables:
        assert len(table) >= 2 and set("".join(table[1])) <= set("-:"), table[:2]  # header, then separator
        assert all(len(row) == len(table[0]) for row in table), table
    return tables


@pytest.fixture(scope="module")
def demo_as_a_user(tmp_path_factory):
    """`ascendopt demo` with no option, as the quick start runs it, in a fresh folder: text output with
    stdout and stderr in one stream (a terminal's order), its own temporary folder to look into."""
    cwd = tmp_path_factory.mktemp("user")
    subprocess.run(["git", "init", "-q", str(cwd)], check=True, timeout=60)  # the quick start, run in a repository
    tmpdir = cwd / "tmp"
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "ASCENDOPT_BACKEND")}
    env.update(TMPDIR=str(tmpdir), PYTHONUNBUFFERED="1", COLUMNS="80")
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "demo"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return cwd, env, proc.stdout


def test_demo_text_reads_in_order_without_noise_or_leftovers(demo_as_a_user):
    cwd, env, text = demo_as_a_user
    assert (cwd / "ascendopt-demo" / "contract.yaml").exists()  # a folder the user can find, in the current one
    assert not list((cwd / "tmp").glob("ascendopt-*")), list((cwd / "tmp").iterdir())  # nothing left in TMPDIR
    assert "USDT" not in text and "profiler_start" not in text  # torch profiler's own lines are not shown
    assert "{'" not in text  # configurations print as NAME=VALUE, never as Python dicts
    # each step's result follows its step: the round's summary and the gate before the report step
    gate_result = re.search(r"^gate: (GREEN|RED|INCONCLUSIVE)", text, re.MULTILINE)
    assert gate_result, text[-3000:]
    assert text.index("round 1 hypothesis:") < gate_result.start() < text.rindex("demo: 7/7 done in ")
    targeted = next(line for line in text.splitlines() if line.startswith("targeted metric"))
    assert "no hardware counters" in targeted and (" up " in targeted or " down " in targeted or "unchanged" in
                                                   targeted)
    assert "Device: Device:" not in (cwd / "ascendopt-demo" / "report.md").read_text()


def test_the_demo_leaves_the_repository_it_runs_in_clean(demo_as_a_user):
    # the demo workspace ignores itself (like a virtualenv or pytest's cache): nothing untracked is left behind
    cwd, _, _ = demo_as_a_user
    assert (cwd / "ascendopt-demo" / ".gitignore").read_text().splitlines()[-1] == "*"
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=cwd, capture_output=True,
                            text=True, timeout=60, check=True)
    assert status.stdout == ""


def test_report_on_stdout_is_the_markdown_file_unwrapped(demo_as_a_user, tmp_path):
    """`ascendopt report > mr.md` at 80 (or 40) columns gives the same markdown as the file, tables whole."""
    cwd, env, _ = demo_as_a_user
    redirected = tmp_path / "mr.md"
    with open(redirected, "w") as fh:
        proc = subprocess.run([sys.executable, "-m", "ascendopt", "report", "-w", "ascendopt-demo"], cwd=cwd,
                              env={**env, "COLUMNS": "40"}, stdout=fh, stderr=subprocess.PIPE, text=True,
                              timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = redirected.read_text()
    assert text == (cwd / "ascendopt-demo" / "report.md").read_text()
    tables = _markdown_tables(text)
    opt_log = next(t for t in tables if t[0][0] == "Iter")
    assert [row[0] for row in opt_log[2:]] == ["0", "1"]  # the baseline row, then round 1


def test_demo_on_an_existing_workspace_names_an_option_it_has(demo_as_a_user, cli):
    cwd, _, _ = demo_as_a_user
    code, out, err = cli("demo", "-w", str(cwd / "ascendopt-demo"))
    assert code == 2 and "pass --force" in err
    from typer.main import get_command

    from ascendopt.cli import app

    demo_params = {opt for p in get_command(app).commands["demo"].params for opt in p.opts}
    assert "--force" in demo_params
