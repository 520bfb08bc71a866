"""What a person sees in a real terminal: `demo`, `optimize-round` and `collect` run in a pseudo-terminal
(pexpect), their raw bytes rendered by a terminal emulator (pyte), and the final screen checked: every log
line starts a line of its own (never glued onto a spinner or bar), no spinner frame or bar is left behind.
Then colour (on a terminal; off with NO_COLOR, --no-color and in a pipe) and --quiet.

Real processes on the CPU interpreter; the emulator's screen is taller than the pty (nothing scrolls off),
which renders cursor moves exactly as a terminal of the pty's size that keeps its scrollback.
"""

import re
import subprocess
import sys
import textwrap

import pytest

from _pty import assert_clean, colours, pty_env, run_pty


@pytest.fixture(scope="module")
def demo_pty(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-pty") / "ws"
    code, raw, lines = run_pty("demo", "-w", str(root), "--pairs", "12")
    return root, code, raw, lines


def test_demo_in_a_pty_leaves_clean_lines(demo_pty):
    _, code, raw, lines = demo_pty
    assert code in (0, 6), "\n".join(lines)
    assert_clean(raw, lines, ["freeze: checking the baseline", "analyze: hot kernels", "gate: correctness",
                              "verdict: ", "gate: ", "files under ", "next: "])
    done = [line for line in lines if line.startswith("demo: 7/7 done in ")]
    assert len(done) == 1, "\n".join(lines)  # the finished progress leaves one plain line
    assert any(line.startswith("timed pairs of tiny") for line in lines)  # the round's spread
    assert any(line.startswith("  pairs plot ") and line.endswith("rounds-pairs.png") for line in lines)


def test_optimize_round_in_a_pty_leaves_clean_lines(demo_pty):
    root, code, _, _ = demo_pty
    assert code in (0, 6)
    code, raw, lines = run_pty("optimize-round", "-w", str(root), "--hypothesis", "tile: larger row tile",
                               "--set", "block_rows=16", "--pairs", "12")
    assert code == 0, "\n".join(lines)
    assert_clean(raw, lines, ["gate: correctness", "verdict: ", "recorded: "])
    assert [line for line in lines if line.startswith("optimize-round: done in ")], "\n".join(lines)


WORKLOAD = textwrap.dedent("""\
    import sys

    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


    x = torch.randn(128)
    y = torch.empty_like(x)
    print("workload module loaded", file=sys.stderr)


    def workload():
        _scale_kernel[(2,)](x, y, x.numel(), BLOCK=64)
""")


def test_collect_in_a_pty_leaves_clean_lines(tmp_path):
    wl = tmp_path / "wl.py"
    wl.write_text(WORKLOAD)
    code, raw, lines = run_pty("collect", "--exec-file", str(wl), "--aic-metrics", "pipe,UB",
                               "--out-dir", str(tmp_path / "prof"), cwd=str(tmp_path))
    assert code == 0, "\n".join(lines)
    assert_clean(raw, lines, ["profile written to "])
    assert [line for line in lines if re.match(r"collect .*: 2/2 done in ", line)], "\n".join(lines)


def _gate(root, *flags: str, env=None):
    return run_pty("--backend", "cpu", *flags, "gate", "--skip-perf", "-w", str(root), env=env)


def test_verdict_and_stage_statuses_are_coloured_on_a_terminal(demo_pty):
    root = demo_pty[0]
    code, raw, lines = _gate(root)
    assert code == 0, "\n".join(lines)
    text = raw.decode()
    # the verdict and the PASS cells in green (SGR 32), the skipped stage dim
    assert re.search(r"\x1b\[[0-9;]*32m(\x1b\[[0-9;]*m)*gate: PASS", text), text
    assert re.search(r"\x1b\[[0-9;]*32mPASS", text), text
    assert "gate: PASS" in lines


@pytest.mark.parametrize("how", ["NO_COLOR", "--no-color", "--no-color after the command"])
def test_no_color_turns_colour_off(demo_pty, how):
    root = demo_pty[0]
    if how == "NO_COLOR":
        code, raw, lines = _gate(root, env=pty_env(NO_COLOR="1"))
    elif how == "--no-color":
        code, raw, lines = _gate(root, "--no-color")
    else:
        code, raw, lines = run_pty("--backend", "cpu", "gate", "--skip-perf", "-w", str(root), "--no-color")
    assert code == 0, "\n".join(lines)
    assert "gate: PASS" in lines
    assert colours(raw) == set(), raw


def test_empty_no_color_keeps_colour(demo_pty):
    """no-color.org: NO_COLOR set but empty does not turn colour off (the control of the test above)."""
    code, raw, _ = _gate(demo_pty[0], env=pty_env(NO_COLOR=""))
    assert code == 0 and "32" in colours(raw)


def test_piped_output_is_plain_text(demo_pty):
    root = demo_pty[0]
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "--backend", "cpu", "gate", "--skip-perf", "-w",
                           str(root)], capture_output=True, env=pty_env(), timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b" not in proc.stdout and b"\x1b" not in proc.stderr
    assert proc.stdout.decode().splitlines()[-1] == "gate: PASS"


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_prints_only_the_verdict(demo_pty, where):
    root = demo_pty[0]
    args = ["--quiet", "gate", "--skip-perf", "-w", str(root)] if where == "before" else \
        ["gate", "--skip-perf", "-w", str(root), "--quiet"]
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "--backend", "cpu", *args], capture_output=True,
                          text=True, env=pty_env(), timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "gate: PASS\n" and proc.stderr == ""
    code, raw, lines = run_pty("--backend", "cpu", *args)  # on a terminal too: no progress, no status
    assert code == 0 and lines == ["gate: PASS"], lines


def test_quiet_keeps_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "--quiet", "gate", "-w", str(tmp_path / "none")],
                          capture_output=True, text=True, env=pty_env(), timeout=600, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: ") and len(proc.stderr.splitlines()) == 1, proc.stderr


def test_report_out_prints_only_the_path(demo_pty, cli, tmp_path):
    root = demo_pty[0]
    md = tmp_path / "mr.md"
    code, out, err = cli("report", "-w", str(root), "--out", str(md))
    assert code == 0, err
    assert out == f"{md}\n" and md.read_text().startswith("#")
    code, out, _ = cli("report", "-w", str(root))  # without --out: the markdown on stdout, as before
    assert code == 0 and out == (root / "report.md").read_text()
