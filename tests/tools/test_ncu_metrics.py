"""tools/ncu_metrics.py on a real ncu raw CSV (tests/data/cuda, captured on the H200): raw metrics per
launch grouped by kernel; files that are not ncu CSVs and metrics that are not there are refused."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import _benchmarks

ncu_metrics = _benchmarks.load("ncu_metrics")
MEMORY = Path(__file__).resolve().parents[1] / "data" / "cuda" / "ncu_raw_memory.csv"


def _axpb_durations_read_directly():
    """The file's own gpu__time_duration.sum cells for _axpb_kernel, read without the tool."""
    from ascendopt.analyze.traces.ncu import header_line

    raw = pd.read_csv(MEMORY, skiprows=header_line(MEMORY), dtype=str, keep_default_na=False)
    rows = raw[raw["Kernel Name"] == "_axpb_kernel"]
    return [float(v.replace(",", "")) for v in rows["gpu__time_duration.sum"]]


def test_metrics_per_launch_of_a_real_ncu_file():
    table, units = ncu_metrics.launches(MEMORY, ["gpu__time_duration.sum", "dram__bytes.sum.per_second"])
    axpb = table[table["kernel"] == "_axpb_kernel"]
    assert list(axpb["gpu__time_duration.sum"]) == _axpb_durations_read_directly()
    assert len(axpb) == 2 and (axpb["dram__bytes.sum.per_second"] > 1e12).all()  # a streaming kernel
    assert units["gpu__time_duration.sum"] == "ns"


def test_the_cli_prints_each_kernels_median():
    proc = subprocess.run([sys.executable, str(_benchmarks.script("ncu_metrics")), str(MEMORY),
                           "--metrics", "gpu__time_duration.sum"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    a, b = _axpb_durations_read_directly()
    assert f"| _axpb_kernel | gpu__time_duration.sum | ns | {a:g}, {b:g} | {(a + b) / 2:g} |" in proc.stdout


@pytest.mark.parametrize("case", ["missing metric", "not ncu", "ragged", "no file"])
def test_bad_input_is_one_line_exit_2(tmp_path, case):
    path = MEMORY
    metric = "gpu__time_duration.sum"
    if case == "missing metric":
        metric = "no__such_metric.sum"
    elif case == "no file":
        path = tmp_path / "absent.csv"
    else:
        path = tmp_path / "x.csv"
        path.write_text("a,b\n1,2\n" if case == "not ncu" else '"ID","Kernel Name"\n"0","k"\n"1","k","x","y"\n')
    proc = subprocess.run([sys.executable, str(_benchmarks.script("ncu_metrics")), str(path),
                           "--metrics", metric], capture_output=True, text=True, timeout=120)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and err.startswith(f"error: {path}: ") and "\n" not in err
    if case == "missing metric":
        assert "'no__such_metric.sum'" in err
    if case == "ragged":
        assert "cannot parse as CSV" in err
