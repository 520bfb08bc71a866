"""benchmarks/auto_screen.py end to end on the CPU interpreter at tiny presets, as the device call runs it."""

import json
import os
import subprocess
import sys

import _benchmarks


def test_the_script_runs_end_to_end_on_cpu_at_tiny_presets(tmp_path):
    out = tmp_path / "auto_screen.json"
    env = {**os.environ, "PYTHONPATH": str(_benchmarks.REPO / "src")}
    proc = subprocess.run([sys.executable, str(_benchmarks.script("auto_screen")), "--backend", "cpu", "--preset",
                           "tiny", "--budget-s", "2", "--max-exhaustive", "2", "--confirm", "1", "--pairs", "12",
                           "--out", str(out)], cwd=_benchmarks.REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["kernel"], r["preset"], r["backend"]) for r in rows] == [
        ("l2norm", "tiny", "cpu"), ("rms_norm", "tiny", "cpu"), ("causal_conv1d", "tiny", "cpu")]
    for r in rows:
        assert "skipped" not in r, r
        assert 1 <= r["screened"] <= r["space"] and r["stopped"] in ("covered", "time", "converged")
        assert r["auto_wall_s"] > 0 and 1 <= r["exhaustive_covered"] <= 2
        # the gap is measured on the exhaustive pass's footing, and nothing there beats its best
        assert r["exhaustive_ms"] <= r["auto_exhaustive_ms"]
        assert r["gap"] == r["auto_exhaustive_ms"] / r["exhaustive_ms"] - 1
    table = [line for line in proc.stdout.splitlines() if line.startswith("| ") and not line.startswith("| kernel")]
    assert [line.split("|")[1].strip() for line in table] == ["l2norm", "rms_norm", "causal_conv1d"]
    assert "cases within 3 % of the exhaustive best; --auto within 5 min wall in 3 of 3" in proc.stdout
    merged = subprocess.run([sys.executable, str(_benchmarks.script("auto_screen")), "--table", str(out)], env=env,
                            capture_output=True, text=True, timeout=120)
    assert merged.returncode == 0 and [line for line in merged.stdout.splitlines() if line.startswith("| l2")] == \
        table[:1]


def test_the_verdict_uses_the_interleaved_recheck_when_the_short_samples_disagree():
    bench = _benchmarks.load("auto_screen")
    row = {"kernel": "k", "preset": "p", "auto_wall_s": 10.0, "screened": 4, "space": 8, "stopped": "covered",
           "auto_best": "A=1,B=0", "auto_ms": 1.0, "exhaustive_best": "A=2,B=0", "exhaustive_ms": 0.9,
           "exhaustive_covered": 8, "gap": 0.1, "default": "A=0,B=0"}
    assert bench.within_3pct(row) is False
    assert bench.within_3pct({**row, "recheck": {"ratio": 1.02, "verdict": "slower"}}) is True
    assert bench.within_3pct({**row, "recheck": {"ratio": 1.08, "verdict": "same"}}) is True
    assert bench.within_3pct({**row, "recheck": {"ratio": 1.08, "verdict": "slower"}}) is False
    line = bench.markdown([row]).splitlines()[-1]
    assert "| A=1 | 1.0000 | A=2 | 0.9000 | 8 / 8 | +10.0% | - | **NO** |" in line
    assert bench.summary_line([row, {"kernel": "x", "preset": "p", "skipped": "time"}]) == \
        "0 of 1 cases within 3 % of the exhaustive best; --auto within 5 min wall in 1 of 1"
