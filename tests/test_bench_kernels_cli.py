"""benchmarks/kernels.py's argument checks: a bad kernel or ``--config`` is one line and exit 2 before any
device work, and ``--out`` is never written (the timing itself needs a CUDA device, see RESULTS.md)."""

import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "kernels.py"


@pytest.mark.parametrize("args, message", [
    (["--kernels", "causal_conv1d", "--config", "EDGES=10"], "tunable EDGES=10: out of range"),
    (["--kernels", "causal_conv1d", "--config", "NOPE=1"], "no tunable 'NOPE'"),
    (["--kernels", "causal_conv1d", "--config", "EDGES"], "not NAME=INTEGER"),
    (["--kernels", "rms_norm,causal_conv1d", "--config", "EDGES=1"], "no tunable 'EDGES'"),  # rms_norm has none
    (["--kernels", "nope"], "unknown kernel 'nope'"),
    (["--kernels", "causal_conv1d", "--modes", "fwd,bwd"], "no kernel asked for has mode 'bwd'"),
])
def test_bad_case_is_one_line_exit_2_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "never.json"
    env = {"ASCENDOPT_BACKEND": "cpu", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, str(_SCRIPT), *args, "--out", str(out)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not out.exists()
