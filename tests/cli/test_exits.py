"""Exit codes hold under pipes and signals (README "Exit codes"): a reader that stops early is not a failure,
Ctrl-C is 130 and SIGTERM 143 with one line and nothing left running, and a contract that no longer reads
is an integrity violation whether it is truncated or not YAML at all.

The pipe and signal tests run the real command in a child process and send it real signals.
"""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import _gate_kernels as gk
from _cli_json import json_envelope
from conftest import DATA

PROFILE = DATA / "ascend" / "level1_cnn"


def _spawn(*args: str, cwd: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ascendopt", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by whoever inherited it) is not running
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _notes_of_an_unpiped_run() -> str:
    """What analyze says on stderr about this profile when nobody closes its stdout (the profile's own notes)."""
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "analyze", str(PROFILE)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_a_reader_that_closes_the_pipe_is_exit_0_and_quiet():
    proc = _spawn("analyze", str(PROFILE))
    proc.stdout.close()  # the reader is gone before the command writes its first line
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert "Broken" not in err and "Traceback" not in err and "Exception ignored" not in err
    assert err == _notes_of_an_unpiped_run()  # nothing added by the closed pipe


def test_analyze_piped_into_head_exits_0():
    script = f"set -o pipefail; {sys.executable} -m ascendopt analyze {PROFILE} | head -n 1"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("profile: ") and proc.stderr == _notes_of_an_unpiped_run()


def test_a_closed_pipe_keeps_the_verdict_exit_code():
    proc = _spawn("ub", "--tile", "BT=1024,BD=1024", "--mult", "3")  # overflows the UB: exit 1
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1, err
    assert "Traceback" not in err and "Broken" not in err


@pytest.fixture
def sleepy_workload(tmp_path):
    """A workload whose module code writes its pid to a marker file, then sleeps in every call."""
    marker = tmp_path / "started.pid"
    (tmp_path / "sleepy.py").write_text(textwrap.dedent(f"""
        import os, pathlib, time
        pathlib.Path({str(marker)!r}).write_text(str(os.getpid()))

        def workload():
            time.sleep(300)
    """))
    return tmp_path / "sleepy.py", marker


def _interrupt_collect(sleepy_workload, tmp_path, signum, *extra):
    path, marker = sleepy_workload
    proc = _spawn("collect", "--exec-file", str(path), "--out-dir", str(tmp_path / "profiles"), "--timeout", "600",
                  *extra, cwd=tmp_path)
    deadline = time.monotonic() + 180
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the workload never started"
        time.sleep(0.2)
    time.sleep(0.5)  # the pid is written: the workload is running (its first call sleeps)
    workload_pid = int(marker.read_text())
    started = time.monotonic()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - started < 30
    deadline = time.monotonic() + 15
    while _alive(workload_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(workload_pid), "the workload outlived the interrupted command"
    return proc.returncode, out, err


def test_ctrl_c_is_exit_130_with_one_line(sleepy_workload, tmp_path):
    code, out, err = _interrupt_collect(sleepy_workload, tmp_path, signal.SIGINT)
    assert code == 130, err
    lines = [line for line in err.splitlines() if "interrupt" in line.lower()]
    assert lines == ["error: interrupted: ascendopt collect stopped by Ctrl-C (SIGINT); the workspace is intact "
                     "(files are replaced whole, child processes were stopped, the lock was released)"]
    assert "Traceback" not in err and out == ""


def test_sigterm_is_exit_143_and_the_json_envelope_says_so(sleepy_workload, tmp_path):
    code, out, err = _interrupt_collect(sleepy_workload, tmp_path, signal.SIGTERM, "--json")
    assert code == 143, err
    env = json_envelope(out)
    assert (env["status"], env["exit_code"], env["error"]["kind"]) == ("interrupted", 143, "terminated")
    assert env["error"]["message"] == "ascendopt collect interrupted"
    assert [line for line in err.splitlines() if "interrupted" in line][0].endswith("was released)")


@pytest.fixture(scope="module")
def frozen_ws(tmp_path_factory):
    """One freeze of the test-only t_scale kernel (cpu, fwd, tiny), copied for each test."""
    from ascendopt import kernels
    from conftest import run_cli

    root = tmp_path_factory.mktemp("frozen")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASCENDOPT_BACKEND", "cpu")
        mp.setattr(kernels, "_registry", {"t_scale": gk.SPEC})
        mp.chdir(root)
        code, _, err = run_cli("freeze", "--kernel", "t_scale", "--mode", "fwd", "--no-profile", "-w", str(root / "ws"))
    assert code == 0, err
    return root / "ws"


def _broken(contract: Path, how: str) -> None:
    text = contract.read_text()
    if how == "truncated":  # a write cut short: valid YAML, half the fields
        contract.write_text(text[: len(text) // 2].rsplit("\n", 1)[0] + "\n")
    elif how == "invalid-yaml":
        contract.write_text(text.replace("workload:", "workload: [unclosed", 1))
    else:  # truncated to nothing
        contract.write_text("")


@pytest.mark.parametrize("how", ["truncated", "invalid-yaml", "empty"])
@pytest.mark.parametrize("command", [("gate", "--skip-perf"), ("optimize-round", "--hypothesis", "x"), ("status",),
                                     ("status", "--rounds"), ("report",), ("reprofile",), ("adopt",)])
def test_a_contract_that_no_longer_reads_is_exit_3(frozen_ws, tmp_path, monkeypatch, cli, how, command):
    ws = tmp_path / "ws"
    shutil.copytree(frozen_ws, ws)
    gk.install(monkeypatch)
    _broken(ws / "contract.yaml", how)
    before = (ws / "contract.yaml").read_bytes()
    code, out, err = cli(*command, "-w", str(ws), "--json")
    env = json_envelope(out)
    assert code == 3 and env["error"]["kind"] == "integrity", err
    assert "contract.yaml" in env["error"]["message"] and "freeze --force" in err  # what and how to repair
    assert (ws / "contract.yaml").read_bytes() == before and not list(ws.glob("rounds/*.yaml"))
