"""The states a user's file system is in end in one line naming the path and the documented exit code, never
in an internal error (70) with a traceback, and leave the saved state as it was (README "Exit codes").

- A read-only workspace (made read-only for real: ``_readonly``): ``status`` and ``report --out -`` read it
  (exit 0); commands that would write it stop before any work, exit 2, naming it.
- A ``contract.yaml`` that is a directory is a damaged workspace: integrity, exit 3 (as a truncated contract),
  and ``freeze --force`` archives nothing.
- Output options (``--junit``, ``--out``, ``--plot``, ``--events``, ``--out-dir``) are checked before any work:
  a folder where a file goes, or a file where a folder goes, is exit 2, nothing written.

Every command runs as a real child process (``python -m ascendopt``) on a workspace a real ``freeze`` made.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _cli_json import json_envelope
from _readonly import readable_copy, run_read_only

FREEZE = ["freeze", "--kernel", "rms_norm", "--shapes", "tiny", "--dtype", "fp32", "--mode", "fwd", "--no-profile",
          "--no-precheck"]


def _umask_022() -> None:
    os.umask(0o022)


def _ascendopt(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ascendopt", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_umask_022)


def _one_error_line(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """The child exited ``code`` with exactly one ``error:`` line on stderr holding every needle; no traceback."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def _state(root: Path) -> dict[str, tuple[str, int]]:
    """Every file and folder under ``root``: (sha256 or "dir", mode)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        digest = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        out[rel] = (digest, path.stat().st_mode)
    return out


@pytest.fixture(scope="module")
def frozen(tmp_path_factory) -> Path:
    """A workspace frozen by a real ``ascendopt freeze`` (rms_norm, tiny, CPU interpreter), made once."""
    root = tmp_path_factory.mktemp("frozen") / "ws"
    proc = _ascendopt(*FREEZE, "-w", str(root), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


@pytest.fixture
def ws(frozen, tmp_path) -> Path:
    """This test's copy of the frozen workspace."""
    root = tmp_path / "ws"
    shutil.copytree(frozen, root)
    return root


def test_files_written_under_umask_022_are_readable_by_others(frozen):
    # a real freeze under umask 022: the contract and the log are 0644 like any file the user writes (not 0600)
    assert (frozen / "contract.yaml").stat().st_mode & 0o777 == 0o644
    assert (frozen / "log.jsonl").stat().st_mode & 0o777 == 0o644


@pytest.fixture
def ro_ws(frozen, tmp_path) -> Path:
    """This test's copy of the frozen workspace, where a child running as another user can reach it."""
    copy = readable_copy(frozen, tmp_path)
    yield copy
    shutil.rmtree(copy.parent, ignore_errors=True)


def test_a_read_only_workspace_is_read_and_never_written(ro_ws):
    ws = ro_ws
    before = _state(ws)
    python = [sys.executable, "-m", "ascendopt"]

    status = run_read_only(ws, [*python, "status", "-w", str(ws)])
    assert status.returncode == 0, status.stderr[-3000:]
    assert "ascendopt status" in status.stdout and "rms_norm" in status.stdout
    report = run_read_only(ws, [*python, "report", "-w", str(ws), "--out", "-"])
    assert report.returncode == 0, report.stderr[-3000:]
    assert report.stdout.startswith("# ascendopt report: rms_norm")

    # writing commands stop before any work, naming what cannot be written
    default_report = run_read_only(ws, [*python, "report", "-w", str(ws)])
    _one_error_line(default_report, 2, f"{ws / 'report.md'}: cannot write (")
    refreeze = run_read_only(ws, [*python, *FREEZE, "--force", "-w", str(ws)])
    _one_error_line(refreeze, 2, f"{ws}: cannot write (")
    round_ = run_read_only(ws, [*python, "optimize-round", "-w", str(ws), "--hypothesis", "x: y",
                                "--set", "weight_mode=1"])
    _one_error_line(round_, 2, f"{ws}: cannot write (")
    assert _state(ws) == before


def test_a_contract_that_is_a_directory_is_an_integrity_failure(ws):
    (ws / "contract.yaml").unlink()
    (ws / "contract.yaml").mkdir()
    (ws / "contract.yaml" / "note.txt").write_text("not a contract\n")
    before = _state(ws)

    gate = _ascendopt("gate", "--skip-perf", "-w", str(ws))
    _one_error_line(gate, 3, f"{ws / 'contract.yaml'}: is a directory")
    refreeze = _ascendopt(*FREEZE, "--force", "-w", str(ws))
    _one_error_line(refreeze, 3, f"{ws / 'contract.yaml'}: is a directory")
    status = _ascendopt("status", "-w", str(ws))
    _one_error_line(status, 3, f"{ws / 'contract.yaml'}: is a directory")
    assert _state(ws) == before and not (ws / "archive").exists()  # nothing archived of a damaged workspace


def test_report_output_paths_are_checked_before_anything_is_written(ws, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x\n")
    before = _state(ws)

    _one_error_line(_ascendopt("report", "-w", str(ws), "--out", str(folder)), 2,
                    f"{folder}: is a directory (--out needs a file path)")
    _one_error_line(_ascendopt("report", "-w", str(ws), "--plot", str(folder)), 2,
                    f"{folder}: is a directory (--plot needs a file path)")
    _one_error_line(_ascendopt("report", "-w", str(ws), "--out", str(a_file / "report.md")), 2,
                    f"{a_file / 'report.md'}: cannot write (")
    assert list(folder.iterdir()) == [] and a_file.read_text() == "x\n"
    assert _state(ws) == before  # no rounds.png beside, no report.md

    # control: a writable path writes both files with the umask's mode
    ok = _ascendopt("report", "-w", str(ws), "--out", str(folder / "r.md"))
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()} == {"r.md": 0o644, "rounds.png": 0o644}


def test_gate_junit_to_a_folder_stops_before_the_gate_runs(ws, tmp_path):
    before = _state(ws)
    proc = _ascendopt("gate", "-w", str(ws), "--junit", str(tmp_path))
    _one_error_line(proc, 2, f"{tmp_path}: is a directory (--junit needs a file path)")
    assert proc.stdout == ""  # no stage ran: the verdict is never computed and then lost
    as_json = _ascendopt("gate", "-w", str(ws), "--junit", str(tmp_path), "--json")
    envelope = json_envelope(as_json.stdout)
    assert as_json.returncode == 2 and envelope["error"]["kind"] == "usage" and envelope["data"] is None
    assert envelope["error"]["where"] == str(tmp_path)
    assert _state(ws) == before


def test_events_and_out_dir_that_are_the_wrong_kind_of_path(ws, tmp_path):
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x\n")
    _one_error_line(_ascendopt("gate", "-w", str(ws), "--skip-perf", "--events", str(tmp_path)), 2,
                    f"{tmp_path}: cannot write (is a directory; --events needs a file path or -)")
    _one_error_line(_ascendopt("collect", "--kernel", "rms_norm", "--shapes", "tiny", "--out-dir", str(a_file)), 2,
                    f"{a_file}: not a directory (--out-dir needs a folder)")
    assert a_file.read_text() == "x\n"
