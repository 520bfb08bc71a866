"""Own code: a workload or frozen test that raises, crashes or hangs is a red stage with the error
(``file:line`` or the limit), the table, --json and --junit are written, optimize-round records the
attempt as a drop, and nothing hangs or is left running.

The repository's ``op.py`` is what each test edits (the frozen files stay intact): the frozen test
calls ``my_op`` on 3 values, the workload on 8, so a planted failure can hit the workload only.
The hanging cases run the CLI in a child process with a wall-clock guard, so a hang fails the test
instead of stalling the suite.
"""

import os
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from _cli_json import json_payload
from _own_code import commit_repo, frozen_own_repo, working_copy
from ascendopt.judge.kernel_hit import CENSUS_CALLS
from ascendopt.process import ProcessTimeout
from ascendopt.rounds import records as rounds
from ascendopt.workspace import Workspace

OP = "def my_op(x):\n    return [v * 2 for v in x]\n"
# torch is imported inside workload(), so the module code loads fast and a short --timeout hits the
# planted hang, not an import on a loaded machine
BENCH = textwrap.dedent("""\
    from op import my_op


    def workload():
        import torch

        with torch.profiler.record_function("my_op_kernel"):
            my_op([1.0] * 8)
    """)
CALL_LINE = 8  # the line of my_op(...) in BENCH
GUARD_S = 120  # wall-clock guard of a CLI child: far above the 5 s limits, far below "hangs forever"


FILES = {"op.py": OP, "bench.py": BENCH, "tests/test_op.py": "from op import my_op\n\n\n"
         "def test_doubles():\n    assert my_op([1, 2, 3]) == [2, 4, 6]\n"}


def _make_repo(root: Path) -> None:
    commit_repo(root, FILES)


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    return frozen_own_repo(tmp_path_factory.mktemp("own") / "repo", FILES)


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    copy = working_copy(frozen_repo, tmp_path, monkeypatch)
    return copy


def _plant(repo: Path, body: str) -> None:
    """``op.py`` with ``body`` run first in every call on the workload's input (8 values)."""
    code = "def my_op(x):\n    if len(x) > 4:\n" + textwrap.indent(textwrap.dedent(body), "        ")
    (repo / "op.py").write_text("import os\nimport subprocess\nimport sys\nimport time\n\nCALLS = [0]\n\n\n"
                                + code + "    return [v * 2 for v in x]\n")


def _hang(repo: Path, pids: Path, when: str = "len(x) > 4") -> None:
    """``op.py`` that, on ``when``, starts a grandchild, writes both pids to ``pids`` and sleeps an hour."""
    (repo / "op.py").write_text(textwrap.dedent(f"""\
        import os
        import subprocess
        import sys
        import time


        def my_op(x):
            if {when}:
                helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
                with open({str(pids)!r}, "w") as fh:
                    fh.write(f"{{os.getpid()}} {{helper.pid}}")
                time.sleep(3600)
            return [v * 2 for v in x]
        """))


def _alive(pid: int) -> bool:
    """A running process (a zombie waiting for a reaper does not count: it runs nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _gone(pids: Path) -> list[int]:
    """The pids the planted hang wrote that are still running (after a short grace for the reaper)."""
    written = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in written):
        time.sleep(0.1)
    return [p for p in written if _alive(p)]


def _cli_child(repo: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, ASCENDOPT_BACKEND="cpu", TRITON_INTERPRET="1")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ascendopt", *args], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=GUARD_S)
    return proc, time.monotonic() - started


def test_a_workload_that_raises_is_a_red_correctness_stage_with_file_line_json_and_junit(repo, cli):
    _plant(repo, 'raise ZeroDivisionError("planted")\n')
    junit = repo.parent / "gate.xml"
    code, out, err = cli("gate", "--json", "--junit", str(junit))
    assert code == 1, err
    result = json_payload(out)
    assert [s["status"] for s in result["stages"]] == ["pass", "fail", "not-run", "not-run"]
    stage = result["stages"][1]
    where = f"{repo / 'bench.py'}:{CALL_LINE}: workload() raised ZeroDivisionError: planted"
    assert stage["summary"].startswith("candidate: " + where) and stage["workload_error"] == stage["summary"]
    assert result["exit_code"] == 1 and result["failed_stage"] == "correctness"
    suite = ET.parse(junit).getroot().find("testsuite")
    failed = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failed] == [("gate.correctness", "workload()")]
    assert where in failed[0].find("failure").text
    code, out, err = cli("gate", "--skip-perf")  # the table too, and the one-line error
    assert code == 1 and "gate: FAIL at correctness (exit 1)" in out and where in err and "Traceback" not in err


def test_a_workload_that_raises_while_timed_is_exit_1_not_a_regression(repo, cli):
    # the correctness stage calls it 1 + 1 + CENSUS_CALLS times (the differential check's call on the workload's
    # own inputs, a warm call, the profiled calls of the kernel census); the timing worker more often
    last = 1 + 1 + CENSUS_CALLS
    _plant(repo, f'CALLS[0] += 1\nif CALLS[0] > {last}:\n    raise RuntimeError("planted on call {last + 1}")\n')
    code, out, err = cli("gate", "--json", "--pairs", "12")
    assert code == 1, err
    result = json_payload(out)
    assert [s["status"] for s in result["stages"]] == ["pass", "pass", "pass", "fail"]
    perf = result["stages"][3]
    assert perf["exit_code"] == 1 and perf["summary"].startswith(
        f"candidate: {repo / 'bench.py'}:{CALL_LINE}: workload() raised RuntimeError: planted on call {last + 1}")
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1  # the baseline worktree is removed on a failure too


def test_a_hanging_workload_ends_at_the_timeout_with_nothing_left_running(repo, tmp_path):
    pids = tmp_path / "pids"
    _hang(repo, pids)
    proc, took = _cli_child(repo, "gate", "--timeout", "5", "--json", "--junit", str(tmp_path / "gate.xml"))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert took < 60
    result = json_payload(proc.stdout)
    stage = result["stages"][1]
    # the differential check's call is the working tree's first
    assert stage["status"] == "fail" and stage["summary"] == (
        "candidate: bench.py workload() checked calls: timed out after 5 s (killed with its process group)")
    assert "gate red at correctness: candidate: bench.py workload() checked calls: timed out after 5 s" \
        in proc.stderr
    assert (tmp_path / "gate.xml").is_file()
    assert _gone(pids) == []  # the workload's process and the process it started were killed


def test_a_hanging_frozen_test_ends_at_the_timeout(repo, tmp_path):
    pids = tmp_path / "pids"
    _hang(repo, pids, when="len(x) == 3")  # only the frozen test's call hangs
    proc, took = _cli_child(repo, "gate", "--timeout", "5", "--skip-perf")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert took < 60 and "timed out after 5 s" in proc.stderr and "gate red at correctness" in proc.stderr
    assert _gone(pids) == []


def test_optimize_round_records_a_raising_change_as_a_drop_with_the_error(repo, cli):
    _plant(repo, 'raise ZeroDivisionError("planted")\n')
    code, out, err = cli("optimize-round", "--hypothesis", "halve the work", "--json")
    assert code == 1, err
    rec = json_payload(out)
    where = f"{repo / 'bench.py'}:{CALL_LINE}: workload() raised ZeroDivisionError: planted"
    assert rec["verdict"] == "drop" and rec["timing"] is None
    assert rec["gate"]["failed_stage"] == "correctness" and where in rec["gate"]["error"]
    assert where in rec["gate"]["summary"] and rec["gate"]["exit_code"] == 1
    (saved,) = rounds.load_rounds(Workspace(repo / ".ascendopt"))
    assert saved.verdict == "drop" and where in saved.gate["error"]
    code, out, err = cli("optimize-round", "--hypothesis", "again, printed")
    flat = " ".join(out.split())  # the console wraps long lines at its width
    assert code == 1 and f"gate: RED at correctness: candidate: {where}" in flat and "recorded: " in out
    assert len(rounds.load_rounds(Workspace(repo / ".ascendopt"))) == 2


def test_optimize_round_records_a_hanging_change_as_a_drop_naming_the_limit(repo, tmp_path):
    pids = tmp_path / "pids"
    _hang(repo, pids)
    proc, took = _cli_child(repo, "optimize-round", "--hypothesis", "halve the work", "--timeout", "5", "--json")
    assert proc.returncode == 1, proc.stderr[-2000:]
    rec = json_payload(proc.stdout)
    assert rec["verdict"] == "drop" and "timed out after 5 s (killed with its process group)" in rec["gate"]["error"]
    assert took < 60 and _gone(pids) == []


def test_freeze_refuses_a_hanging_or_raising_workload_in_one_line(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    _make_repo(root)
    pids = tmp_path / "pids"
    _hang(root, pids)
    proc, took = _cli_child(root, "freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py",
                            "--kernel-filter", "my_op_kernel", "--timeout", "5")
    assert proc.returncode == 1 and took < 60, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    # freeze's first call is the one whose outputs it records (judge.equivalence), so the hang ends there
    assert "freeze: baseline: bench.py workload() output call: timed out after 5 s" in line
    assert "refusing to freeze" in line and "Traceback" not in proc.stderr
    assert not (root / ".ascendopt" / "contract.yaml").exists() and _gone(pids) == []

    from conftest import run_cli

    _plant(root, 'raise ZeroDivisionError("planted")\n')
    monkeypatch.chdir(root)
    code, out, err = run_cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py",
                             "--kernel-filter", "my_op_kernel")
    assert code == 1 and f"{root / 'bench.py'}:{CALL_LINE}: workload() raised ZeroDivisionError: planted" in err
    assert not (root / ".ascendopt" / "contract.yaml").exists()


def test_the_workload_child_is_killed_on_expiry_and_a_crash_names_the_line(tmp_path):
    from ascendopt.judge.interleave import WorkloadError, workload_process

    (tmp_path / "w.py").write_text("import os\nimport time\n\n\ndef workload():\n    time.sleep(3600)\n")
    with workload_process(tmp_path, "w.py", "candidate", load_s=60) as child:
        with pytest.raises(ProcessTimeout) as caught:
            child.kernels(1)
        pid = child.pid
    assert str(caught.value) == "candidate: w.py workload() kernel-hit calls: timed out after 1 s " \
                                "(killed with its process group)"
    assert not _alive(pid)

    (tmp_path / "w.py").write_text("import os\nimport signal\n\n\ndef workload():\n"
                                   "    os.kill(os.getpid(), signal.SIGSEGV)\n")
    with pytest.raises(WorkloadError) as caught:
        with workload_process(tmp_path, "w.py", "baseline", load_s=60) as child:
            child.measure(60)
    message = str(caught.value)
    assert message.startswith(f"baseline: {tmp_path / 'w.py'}:6: the workload process died (killed by SIGSEGV) "
                              "during workload() timing")
    assert caught.value.exit_code == 1

    (tmp_path / "w.py").write_text("import time\ntime.sleep(3600)\n")  # module code that hangs
    with pytest.raises(ProcessTimeout, match=r"^baseline: w.py module code: timed out after 1 s"):
        with workload_process(tmp_path, "w.py", "baseline", load_s=1):
            pass
