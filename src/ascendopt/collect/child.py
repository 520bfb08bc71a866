"""The workload's own process: ``python -m ascendopt.collect.child SPEC.json``.

Why a child: a workload can crash the interpreter, hang, or leave device state behind; the
parent (``ascendopt collect``) keeps control, enforces ``--timeout`` by killing the child's
process group, and removes the staging folder on any failure. Nsight Compute also needs a
process to launch (``ncu ... python -m ascendopt.collect.child``).

SPEC (JSON, written by the parent): ``mode`` (``profile``: one profiler run per entry of
``settings`` (one per metric group), each writing its profile folder into ``staging``; ``replay``:
just run the steps of ``settings[0]``, for ncu), ``workload`` (``{"exec_file": path}`` or
``{"kernel": {...}}``), ``settings``, ``staging``, ``out_dir``, ``meta`` (workload identity,
command, set_id, git_dir) and ``result`` (where the child writes its outcome JSON: ``{"ok": true,
"folders": [[...] per group]}`` or ``{"ok": false, "exit_code": N, "message": "..."}``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendopt.collect.workload import WorkloadFailure
from ascendopt.errors import CorrectnessError, EnvironmentProblem, IntegrityError, RegressionError
from ascendopt.process import kill_group


class ChildDied(WorkloadFailure):
    """The child ended without writing a result (killed, crashed, or its launcher failed)."""

    def __init__(self, message: str, *, log: Path):
        super().__init__(message, hint=f"full output: {log}")
        self.log = log


# Exit code reported by the child -> the error the parent raises (same exit code).
_ERRORS = {1: CorrectnessError, 2: WorkloadFailure, 3: IntegrityError, 4: RegressionError, 5: EnvironmentProblem}


def _make_workload(spec: dict[str, Any]) -> Callable[[], Any]:
    from ascendopt.collect.workload import kernel_callable, load_exec_file

    workload = spec["workload"]
    if "exec_file" in workload:
        return load_exec_file(Path(workload["exec_file"]))
    return kernel_callable(workload["kernel"])


def _run(spec: dict[str, Any]) -> list[list[str]]:
    from ascendopt.collect.runs import profile_into
    from ascendopt.collect.settings import ProfileSettings
    from ascendopt.device import backends

    # The workload first: a file that fails to load is reported without waiting for torch.
    fn = _make_workload(spec)
    backend = backends.current()
    settings = [ProfileSettings.from_dict(s) for s in spec["settings"]]
    if spec["mode"] == "replay":
        for _ in range(settings[0].steps):
            fn()
            backend.synchronize()
        return []
    meta = spec["meta"]
    folders = []
    for one in settings:  # one profiler run per metric group, module code ran once above
        done = profile_into(fn, one, Path(spec["staging"]), out_dir=Path(spec["out_dir"]), workload=meta["workload"],
                            command=meta["command"], set_id=meta["set_id"], git_dir=Path(meta["git_dir"]))
        folders.append([str(f) for f in done])
    return folders


def main(argv: list[str]) -> int:
    from ascendopt.errors import AscendoptError

    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    try:
        result: dict[str, Any] = {"ok": True, "folders": _run(spec)}
    except AscendoptError as exc:
        result = {"ok": False, "exit_code": int(exc.exit_code), "message": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - a bug or an unexpected crash: report, with traceback in the log
        traceback.print_exc()
        result = {"ok": False, "exit_code": 70, "message": f"collector failed in the workload process: {exc!r}"}
    Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
    return 0 if result["ok"] else 1


# -- parent side ---------------------------------------------------------------------------------


def child_env(backend: str) -> dict[str, str]:
    """The parent's environment plus the backend choice; the interpreter flag for cpu must be set
    before the child imports triton; ascendopt's source root goes on PYTHONPATH so an
    uninstalled checkout works too."""
    env = dict(os.environ)
    env["ASCENDOPT_BACKEND"] = backend
    env["PYTHONUNBUFFERED"] = "1"
    if backend == "cpu":
        env["TRITON_INTERPRET"] = "1"
    src_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src_root, env.get("PYTHONPATH", "")) if p)
    return env


def _last_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def run_child(spec: dict[str, Any], *, label: str, timeout: float | None, prefix: list[str] | None = None,
              backend: str) -> dict[str, Any]:
    """Run the child (optionally under ``prefix``, e.g. an ncu command) and return its result.

    Raises WorkloadFailure (exit 2) on a timeout or a child that died without a result, and the
    child's own error class (by exit code) when it reported one. Output goes to a log file whose
    path the error names; on success the result carries it as ``output``.
    """
    work = Path(tempfile.mkdtemp(prefix="ascendopt-collect-"))
    spec = dict(spec, result=str(work / "result.json"))
    (work / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    log = work / "child.log"
    cmd = list(prefix or []) + [sys.executable, "-m", "ascendopt.collect.child", str(work / "spec.json")]
    with open(log, "wb") as log_fh:
        proc = subprocess.Popen(cmd, stdout=log_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=child_env(backend), start_new_session=True)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise WorkloadFailure(f"{label}: timed out after {timeout:g} s (killed with its process group)",
                                  hint=f"output so far: {log}") from None
        except BaseException:  # interrupted: no error names the log, so nothing of the run stays in /tmp
            kill_group(proc)
            shutil.rmtree(work, ignore_errors=True)
            raise
    result_path = work / "result.json"
    if not result_path.exists():
        raise ChildDied(f"{label}: the workload process exited with code {returncode} and no result "
                        f"({_last_line(log) or 'no output'})", log=log)
    result = json.loads(result_path.read_text(encoding="utf-8"))
    if result["ok"]:
        # Success: keep the output (ncu reads its own messages from it) and drop the temp folder;
        # on failure the folder stays, since the error message points at its log.
        result["output"] = log.read_text(encoding="utf-8", errors="replace")
        shutil.rmtree(work, ignore_errors=True)
        return result
    code = int(result.get("exit_code", 70))
    if code not in _ERRORS:
        raise RuntimeError(f"{result['message']} (traceback in {log})")
    raise _ERRORS[code](result["message"], hint=f"full output: {log}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
