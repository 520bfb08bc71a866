"""Ordinary mistakes get one line that names what and where, the documented exit code, and never a hang."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def test_a_workspace_setting_pointing_nowhere_names_the_setting(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASCENDOPT_WORKSPACE", str(tmp_path / "nowhere"))
    for command in (["status"], ["gate"], ["report"]):
        code, out, err = cli(*command)
        (line,) = err.strip().splitlines()
        assert code == 2 and f"{tmp_path / 'nowhere'}: no contract, no such folder (from $ASCENDOPT_WORKSPACE)" in line


def test_a_file_given_for_the_workspace_says_so(tmp_path, cli, monkeypatch):
    monkeypatch.delenv("ASCENDOPT_WORKSPACE", raising=False)
    bench = tmp_path / "bench.py"
    bench.write_text("")
    code, _, err = cli("gate", "-w", str(bench))
    (line,) = err.strip().splitlines()
    assert code == 2 and f"{bench}: a file, not a workspace folder, so no contract (from --workspace)" in line


def test_a_folder_given_for_the_workload_file_says_so(tmp_path, cli, monkeypatch):
    (tmp_path / "mylib").mkdir()
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("freeze", "--exec-file", "mylib", "--test", "t.py", "--kernel-filter", "k", "-w", "ws")
    (line,) = err.strip().splitlines()
    assert code == 2 and "mylib: a folder, not a file" in line


@pytest.mark.parametrize("kind", ["folder", "fifo", "dangling link"])
def test_analyze_names_a_profile_table_that_is_not_a_regular_file(tmp_path, kind):
    """A FIFO named like a profile's table is never opened (reading it would wait forever); a folder or a link to
    nothing under that name is named as what it is, whether the run folder or the entry itself is given."""
    run = tmp_path / "run"
    run.mkdir()
    entry = run / "kernel_details.csv"
    if kind == "folder":
        entry.mkdir()
        what = "a folder, not a file"
    elif kind == "fifo":
        os.mkfifo(entry)
        what = "a FIFO or other special file"
    else:
        entry.symlink_to(tmp_path / "gone.csv")
        what = f"a link to nothing ({tmp_path / 'gone.csv'})"
    for given in ([str(run)] if kind == "folder" else [str(run), str(entry)]):
        # a process of its own with a time limit: a reader that opened the FIFO would wait forever
        done = subprocess.run([sys.executable, "-m", "ascendopt", "analyze", given], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "300"})
        (line,) = done.stderr.strip().splitlines()
        assert done.returncode == 2 and done.stdout == "" and f"{entry}: {what}" in line, line


def test_a_raising_workload_is_not_told_to_take_more_time(tmp_path, cli, monkeypatch):
    """A workload that raises needs a fix, not --timeout: the hint offers more time only after a time limit."""
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "op.py").write_text("def my_op(x):\n    return x + 1\n")
    (root / "tests" / "test_op.py").write_text("from op import my_op\n\n\ndef test_op():\n    assert my_op(1) == 2\n")
    (root / "bench.py").write_text("def workload():\n    raise ValueError('broken workload')\n")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    monkeypatch.chdir(root)
    code, _, err = cli("--backend", "cpu", "freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py",
                       "--kernel-filter", "my_op", "--no-profile", "-w", str(root / ".ascendopt"))
    (line,) = [x for x in err.strip().splitlines() if x.startswith("error:")]
    assert code == 1 and "broken workload" in line and "fix the workload" in line and "--timeout" not in line, err


def test_a_child_that_dies_on_a_full_disk_is_said_as_a_full_disk(tmp_path, cli, monkeypatch):
    """The worker dies while the baseline's outputs are saved into a temporary folder whose disk is full: exit 5
    naming that folder and the full disk, not a workload fault (the disk's fullness is faked for this process
    only: the worker's death is real)."""
    import shutil
    from collections import namedtuple

    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_op.py").write_text("def test_op():\n    assert 1 + 1 == 2\n")
    # dies in the call whose outputs are saved (the first call of the worker: freeze's output call)
    (root / "bench.py").write_text("import os\n\n\ndef workload():\n    os._exit(120)\n")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    monkeypatch.chdir(root)
    real = shutil.disk_usage
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(1 << 30, 1 << 30, 0)
                        if "ascendopt-outputs-" in str(p) else real(p))
    code, _, err = cli("--backend", "cpu", "freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py",
                       "--kernel-filter", "my_op", "--no-profile", "-w", str(root / ".ascendopt"))
    (line,) = [x for x in err.strip().splitlines() if x.startswith("error:")]
    assert code == 5 and "ascendopt-outputs-" in line and "no space left on the disk holding the baseline's " \
        "saved outputs (0 bytes free)" in line, err
