"""Tables people read and programs read: --csv for every table the CLI prints, `status --rounds` (all rounds
side by side), `analyze --list` stamps as ISO local times, durations by magnitude, the spread and histogram
of timed pairs. Real CLI runs (in-process) on the test profiles and a real workspace made by `demo`."""

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _cli_json import json_payload
from ascendopt.cli.render import format_duration_us, sparkline, spread, spread_lines

DATA = Path(__file__).resolve().parents[1] / "data"
PROFILE = DATA / "ascend" / "level1_cnn"


def _csv_tables(text: str) -> list[list[list[str]]]:
    """CSV tables separated by blank lines."""
    return [list(csv.reader(io.StringIO(block))) for block in text.strip("\n").split("\n\n") if block]


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-tables") / "ws"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "ASCENDOPT_BACKEND")}
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "demo", "-w", str(root), "--pairs", "12", "--json"],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode in (0, 6), proc.stderr[-3000:]
    return root


def test_format_duration_us_picks_the_unit_by_magnitude():
    assert format_duration_us(0.5) == "0.50 us"
    assert format_duration_us(850) == "850.00 us"
    assert format_duration_us(12_345) == "12.35 ms"
    assert format_duration_us(1_234_567) == "1.23 s"
    assert format_duration_us(None) == "-" and format_duration_us(float("nan")) == "-"


def test_spread_and_sparkline():
    s = spread([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s["min"], s["median"], s["max"], s["iqr"], s["n"]) == (1.0, 3.0, 100.0, 2.0, 5)
    line = sparkline([0, 0, 0, 1, 9], 0, 9, bins=3, ascii_only=False)
    assert line == "█ ▂"  # 4 in the first bin (the fullest: 8 of 8), none in the middle, 1 (2 of 8) in the last
    assert sparkline([0, 0, 0, 1, 9], 0, 9, bins=3, ascii_only=True) == "@ :"


def test_spread_lines_share_one_range_and_fall_back_to_ascii(monkeypatch):
    lines = spread_lines({"baseline": [1.0, 1.0, 2.0], "candidate": [2.0, 2.0, 2.0]}, ascii_only=False)
    assert lines[0].startswith("  baseline   n=3  min 1.00 ms  median 1.00 ms  max 2.00 ms  IQR 500.00 us  |")
    # one shared range: the candidate's samples all sit in the last bin, the baseline's mostly in the first
    hist = {line.split()[0]: line.rsplit("|", 2)[1] for line in lines}
    assert hist["candidate"][-1] == "█" and set(hist["candidate"][:-1]) == {" "}
    assert hist["baseline"][0] == "█" and hist["baseline"][-1] != " "
    monkeypatch.setenv("NO_COLOR", "1")  # by default: ASCII under NO_COLOR (whatever the encoding)
    assert all(ch in " .:-=+*#%@" for ch in spread_lines({"a": [1.0, 2.0]})[0].rsplit("|", 2)[1])


def test_analyze_list_prints_iso_local_times(cli, tmp_path):
    shutil.copytree(PROFILE, tmp_path / "h_1_20250102030405123_ascend_pt")
    code, out, err = cli("analyze", str(tmp_path), "--list")
    assert code == 0, err
    assert "2025-01-02T03:04:05.123" in out and "20250102030405123" not in out.replace(
        "h_1_20250102030405123_ascend_pt", "")


def test_analyze_csv(cli):
    code, out, err = cli("analyze", str(PROFILE), "--csv", "--top", "3")
    assert code == 0, err
    tables = _csv_tables(out)
    assert tables and all(len({len(row) for row in t}) == 1 for t in tables)  # rectangular, a header each
    kernel_table = next(t for t in tables if t[0][0] == "kernel")
    assert len(kernel_table) == 1 + 3
    assert "┃" not in out and "│" not in out


def test_kernels_csv(cli):
    code, out, err = cli("kernels", "--csv")
    assert code == 0, err
    (table,) = _csv_tables(out)
    assert table[0][:2] == ["kernel", "bound"] and "rms_norm" in [row[0] for row in table[1:]]


def test_status_rounds_side_by_side(demo_ws, cli):
    code, out, err = cli("optimize-round", "-w", str(demo_ws), "--hypothesis", "tile: x", "--set", "block_rows=8",
                         "--pairs", "12")
    assert code == 0, err
    code, out, err = cli("status", "-w", str(demo_ws), "--rounds")
    assert code == 0, err
    assert "rounds side by side (2)" in out
    code, out, err = cli("status", "-w", str(demo_ws), "--rounds", "--csv")
    assert code == 0, err
    ledger = next(t for t in _csv_tables(out) if t[0][0] == "round")
    assert [row[0] for row in ledger[1:]] == ["1", "2"]
    assert ledger[0] == ["round", "direction", "change", "gate", "time", "vs baseline", "vs best", "noise band",
                         "verdict", "reason"]
    assert ledger[2][2] == "block_rows=8" and ledger[2][3] == "pass"
    assert all(row[9] for row in ledger[1:])  # every verdict with its reason (issue 41)
    assert ledger[2][8] in ("keep", "revert", "floor") and ledger[2][7].startswith("±")
    code, out, err = cli("status", "-w", str(demo_ws), "--rounds", "--json")
    rows = json_payload(out)["ledger"]  # validated against status.schema.json by the envelope helper
    assert [r["number"] for r in rows] == [1, 2] and rows[1]["change"] == {"block_rows": 8}
    assert rows[1]["verdict"] == ledger[2][8]
    code, out, _ = cli("status", "-w", str(demo_ws), "--json")
    assert "ledger" not in json_payload(out)  # without --rounds the payload is as it was


def test_gate_csv_stage_table(demo_ws, cli):
    code, out, err = cli("--backend", "cpu", "gate", "--skip-perf", "-w", str(demo_ws), "--csv")
    assert code == 0, err
    (table,) = _csv_tables(out)
    assert table[0] == ["stage", "status", "summary"]
    assert [row[:2] for row in table[1:]] == [["integrity", "PASS"], ["correctness", "PASS"],
                                              ["kernel_hit", "PASS"], ["performance", "SKIP"]]
    assert "gate: PASS" in err  # the verdict line is not part of the CSV


def test_report_plots_the_timed_pairs(demo_ws, cli, tmp_path):
    md = tmp_path / "mr.md"
    code, out, err = cli("report", "-w", str(demo_ws), "--out", str(md), "--json")
    assert code == 0, err
    data = json_payload(out)
    assert data["pairs_plot"] == str(tmp_path / "rounds-pairs.png")  # beside the rounds plot
    assert Path(data["pairs_plot"]).read_bytes()[:4] == b"\x89PNG"
    text = md.read_text()
    assert "## Timed pairs" in text and f"]({Path(data['pairs_plot']).name})" in text


def test_pairs_plot_needs_timed_pairs(tmp_path):
    from ascendopt.rounds.pairs_plot import plot_pairs

    assert plot_pairs([], tmp_path / "p.png") is None and not (tmp_path / "p.png").exists()
