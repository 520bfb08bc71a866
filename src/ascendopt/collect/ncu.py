"""Hardware counters on cuda: re-run the workload under Nsight Compute (``ncu``) in a child process.

torch.profiler gives durations only; counters need a second run under ncu (CUPTI cannot serve
both at once). The sections follow the asked metric group, mapped onto what ncu measures
(docs/peers.md §2.2):

* PipeUtilization, ArithmeticUtilization -> SpeedOfLight, ComputeWorkloadAnalysis (its pipe
  utilization metrics), InstructionStats
* Memory, MemoryUB, L2Cache, MemoryAccess, MemoryL0 -> SpeedOfLight, MemoryWorkloadAnalysis
* ResourceConflictRatio -> SpeedOfLight, MemoryWorkloadAnalysis, MemoryWorkloadAnalysis_Tables
  (shared-memory bank conflicts)

LaunchStats is always added (grid size = the counterpart of Block Dim). The report is exported
(``ncu_report.ncu-rep``, readable in the Nsight Compute UI) and ``ncu --import ... --csv --page raw``
is kept unmodified as ``ncu_raw.csv``; importing keeps the workload's own prints out of the CSV.
Clocks stay at ncu's default (locked to base) so ratios are comparable between runs.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from ascendopt import process
from ascendopt.errors import EnvironmentProblem, ProfileError

_COMPUTE = ["SpeedOfLight", "ComputeWorkloadAnalysis", "InstructionStats"]
_MEMORY = ["SpeedOfLight", "MemoryWorkloadAnalysis"]
SECTIONS: dict[str, list[str]] = {
    "PipeUtilization": _COMPUTE,
    "ArithmeticUtilization": _COMPUTE,
    "Memory": _MEMORY,
    "MemoryUB": _MEMORY,
    "L2Cache": _MEMORY,
    "MemoryAccess": _MEMORY,
    "MemoryL0": _MEMORY,
    "ResourceConflictRatio": _MEMORY + ["MemoryWorkloadAnalysis_Tables"],
}
MAX_LAUNCHES = 64  # bounds the replay time: each profiled launch is replayed once per counter pass
TOP_KERNELS = 8
IMPORT_TIMEOUT_S = 600.0  # converting a report to CSV takes seconds; ten minutes means ncu is stuck
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def require() -> str:
    """Path of ``ncu``; EnvironmentProblem (exit 5) when it is not on PATH."""
    path = shutil.which("ncu")
    if path is None:
        raise EnvironmentProblem("ncu (Nsight Compute) is not on PATH; hardware counters on cuda need it",
                                 hint="install Nsight Compute, add it to PATH, or use --aic-metrics none")
    return path


def kernel_regex(kernels_csv: Path, kernel_filter: str | None) -> str | None:
    """The ``-k regex:`` filter: the user's filter (a substring, escaped, or ``regex:EXPR``), else the hottest kernels
    of the torch.profiler run whose names are plain identifiers (Triton kernels; library kernels
    with C++ signatures would not match ncu's function-name base anyway). None = no filter."""
    if kernel_filter:
        if kernel_filter.startswith("regex:"):  # same convention as `analyze --kernel-filter`
            return kernel_filter[len("regex:"):]
        return re.escape(kernel_filter)
    import pandas as pd

    table = pd.read_csv(kernels_csv)
    table = table[(table["core_type"] == "cuda") & table["name"].astype(str).str.match(_IDENTIFIER)]
    if table.empty:
        return None
    hottest = table.groupby("name")["duration_us"].sum().sort_values(ascending=False).head(TOP_KERNELS)
    return "^(" + "|".join(re.escape(n) for n in hottest.index) + ")$"


def command(ncu: str, group: str, regex: str | None, report: Path) -> list[str]:
    cmd = [ncu, "--target-processes", "all", "--launch-count", str(MAX_LAUNCHES)]
    if regex:
        cmd += ["-k", f"regex:{regex}"]
    for section in SECTIONS[group] + ["LaunchStats"]:
        cmd += ["--section", section]
    return cmd + ["-o", str(report), "-f"]


def _ncu_error(text: str) -> str:
    errors = [ln.strip() for ln in text.splitlines() if ln.startswith("==ERROR==")]
    return errors[-1] if errors else ""


def collect(folder: Path, group: str, spec: dict[str, Any], *, kernel_filter: str | None,
            timeout: float | None, label: str) -> dict[str, Any]:
    """Replay the workload under ncu and write ``ncu_raw.csv`` (+ the .ncu-rep) into ``folder``.

    Returns the facts recorded in the metadata (command, sections, filter)."""
    from ascendopt.collect.child import ChildDied, run_child

    ncu = require()
    regex = kernel_regex(folder / "kernels.csv", kernel_filter)
    report = folder / "ncu_report"
    prefix = command(ncu, group, regex, report)
    try:
        result = run_child(dict(spec, mode="replay"), label=f"{label} under ncu", timeout=timeout, prefix=prefix,
                           backend="cuda")
    except ChildDied as exc:
        # ncu itself failed (permissions, unknown section, ...)
        reason = _ncu_error(exc.log.read_text(encoding="utf-8", errors="replace"))
        if reason:
            raise EnvironmentProblem(f"ncu failed: {reason}", hint=f"full output: {exc.log}") from None
        raise
    rep = folder / "ncu_report.ncu-rep"
    if not rep.exists():
        reason = _ncu_error(result["output"])
        if reason:
            raise EnvironmentProblem(f"ncu failed: {reason}")
        which = f"matching regex:{regex}" if regex else "at all"
        raise ProfileError(f"Nsight Compute profiled no kernel {which}",
                           hint="pass --kernel-filter with a substring of the kernel name")
    try:
        proc = process.run([ncu, "--import", str(rep), "--csv", "--page", "raw"], label=f"ncu --import {rep}",
                           timeout=IMPORT_TIMEOUT_S)
    except process.ProcessTimeout as exc:
        raise EnvironmentProblem(str(exc)) from None
    if proc.returncode != 0 or not proc.stdout.strip():
        raise EnvironmentProblem(f"ncu --import {rep} failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    (folder / "ncu_raw.csv").write_text(proc.stdout, encoding="utf-8")
    recorded = [a if a != str(report) else report.name for a in prefix]  # the staging path is gone by now
    return {"command": " ".join(recorded + ["python", "-m", "ascendopt.collect.child", "SPEC"]),
            "sections": SECTIONS[group] + ["LaunchStats"], "kernel_regex": regex, "max_launches": MAX_LAUNCHES}
