"""benchmarks/conv_edges_wall.py: each way of running the edge launch does what its name says (interpreter,
small shapes), and without a cuda backend the script is one line and exit 5."""

import subprocess
import sys

import pytest
import torch

import _benchmarks
from ascendopt.kernels.causal_conv1d_fwd import causal_conv1d_fwd
from ascendopt.kernels.common import nan_poisoning

study = _benchmarks.load("conv_edges_wall")


def _forward(way: str, edges: int):
    gen = torch.Generator().manual_seed(7)
    x, w = torch.randn(2, 45, 24, generator=gen), torch.randn(24, 4, generator=gen)
    with nan_poisoning(), study.edges_as(way):
        y, _ = causal_conv1d_fwd(x, w, activation="silu", BT=8, BD=16, taps=2, edges=edges, edge_bt=4)
    return y


@pytest.mark.parametrize("edges", [4, 8])
def test_serial_edges_give_the_full_result_and_bulk_only_leaves_exactly_the_edge_rows(edges):
    full = _forward("full", edges)
    assert torch.isfinite(full).all()
    assert torch.equal(_forward("serial", edges), full) and torch.equal(_forward("prio", edges), full)
    for way in ("fork", "bulk"):
        y = _forward(way, edges)
        written = torch.isfinite(y).all(-1)  # [B, T]: rows the bulk launch wrote
        # EDGES=4: tiles 1..4 of 8 rows (8..39) are bulk; EDGES=8: every row from W-1 = 3 on
        want = torch.zeros(45, dtype=torch.bool)
        want[8:40] = edges == 4
        want[3:] = want[3:] | (edges == 8)
        assert torch.equal(written, want.expand(2, 45)), way
        assert torch.equal(y[written], full[written])


@pytest.mark.parametrize("args, code, message", [
    ([], 5, "needs the cuda backend, got cpu"),
    (["--pairs", "0"], 2, "--pairs 0: at least 1"),
    (["--preset", "nope"], 2, "no shape preset 'nope'"),
    (["--configs", "EDGES=99"], 2, "EDGES=99: out of range"),
])
def test_bad_input_or_no_cuda_is_one_line_and_writes_nothing(tmp_path, args, code, message):
    out = tmp_path / "never.json"
    script = str(_benchmarks.BENCHMARKS / "conv_edges_wall.py")
    proc = subprocess.run([sys.executable, script, *args, "--out", str(out)], capture_output=True, text=True,
                          timeout=300, env={"ASCENDOPT_BACKEND": "cpu", "PATH": "/usr/bin:/bin"})
    err = proc.stderr.strip()
    assert proc.returncode == code, proc.stderr
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not out.exists()
