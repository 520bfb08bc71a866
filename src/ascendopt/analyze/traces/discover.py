"""Find profile runs: what a path is, and which run to read when a folder holds several.

A run is one of: a torch_npu ``*_ascend_pt`` folder (or any folder holding
``ASCEND_PROFILER_OUTPUT/``), an ``ASCEND_PROFILER_OUTPUT`` folder itself, msprof output
(``PROF_*`` / ``mindstudio_profiler_output`` with ``op_summary_*.csv``), an ``msprof op``
folder (``OPPROF_*``, per-block CSVs), or this tool's cuda/cpu folder (``kernels.csv``,
``trace.json``, ``ncu_raw*.csv``, ``ascendopt_profile.yaml``). A parent folder's runs are
ordered by the timestamp in their names (then by modification time); the newest is read unless
the caller names one (docs/profiler-formats.md §2: never "the first glob match").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ascendopt.errors import ProfileError

PROFILE_YAML = "ascendopt_profile.yaml"
_STAMPS = (
    re.compile(r"_(\d{14,17})_ascend_(?:pt|ms)$"),
    re.compile(r"_(\d{8})-(\d{6})_ascendopt_"),
    re.compile(r"^PROF_\d+_(\d{14,17})"),
    re.compile(r"^OPPROF_(\d{8,})"),
)


@dataclass(frozen=True)
class Run:
    """One profile run: its folder (or file), its kind, and the sort stamp from its name."""

    path: Path
    kind: str  # npu | msprof | msprof-op | ascendopt (cuda/cpu folder; backend read later)
    stamp: str

    def sort_key(self) -> tuple[str, float]:
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            mtime = 0.0
        return (self.stamp, mtime)


def stamp_of(name: str) -> str:
    for pattern in _STAMPS:
        m = pattern.search(name)
        if m:
            return "".join(m.groups()).ljust(17, "0")
    return ""


def odd_entry(path: Path) -> str | None:
    """What ``path`` is when it is neither a regular file nor a folder ("a link to nothing (TARGET)", "a FIFO or
    other special file"), else None: such an entry is never opened, since reading a FIFO would wait forever."""
    if path.is_symlink() and not path.exists():
        try:
            return f"a link to nothing ({path.readlink()})"
        except OSError:
            return "a link to nothing"
    if path.exists() and not path.is_file() and not path.is_dir():
        return "a FIFO or other special file, not a regular file"
    return None


def _first_cell(path: Path) -> str:
    if not path.is_file():  # a folder or a FIFO named like a CSV: nothing to read (a FIFO would block)
        return ""
    try:
        with open(path, "rb") as f:
            line = f.readline(4096)
    except OSError:
        return ""
    return line.split(b",", 1)[0].strip().decode("utf-8", "replace").lstrip("\ufeff")


def block_csvs(folder: Path) -> list[Path]:
    """``msprof op`` per-block CSVs in a folder (header starts with ``block_id``)."""
    return sorted(p for p in folder.glob("*.csv") if _first_cell(p) == "block_id")


def op_summaries(folder: Path) -> list[Path]:
    """msprof ``op_summary*.csv`` files (``op_summary_<stamp>.csv``, or ``op_summary.csv`` as users rename
    them) in a folder, its mindstudio_profiler_output, or its PROF_*/mindstudio_profiler_output."""
    for pattern in ("op_summary*.csv", "mindstudio_profiler_output/op_summary*.csv",
                    "PROF_*/mindstudio_profiler_output/op_summary*.csv"):
        found = sorted(p for p in folder.glob(pattern) if p.is_file())
        if found:
            return found
    return []


def kernel_tables(folder: Path) -> list[Path]:
    """torch_npu kernel tables held directly in a folder: ``kernel_details.csv`` first, then copies users
    renamed (``kernel_details_rank0.csv``), by name."""
    exact = folder / "kernel_details.csv"
    others = sorted(p for p in folder.glob("kernel_details*.csv") if p.name != exact.name and p.is_file())
    return ([exact] if exact.is_file() else []) + others


def _is_op_summary_jsonl(path: Path) -> bool:
    """An ``msprof op`` summary.jsonl (it holds an OpInfoSummary record), not any file of that name."""
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            return b'"OpInfoSummary"' in f.read(1 << 16)
    except OSError:
        return False


def kind_of_dir(folder: Path) -> str | None:
    """The kind of run a folder is, or None when it is not a run itself."""
    if (folder / "ASCEND_PROFILER_OUTPUT").is_dir():
        return "npu"
    if folder.name == "ASCEND_PROFILER_OUTPUT" or kernel_tables(folder):
        return "npu"
    if (folder / PROFILE_YAML).is_file() or (folder / "kernels.csv").is_file() or any(folder.glob("ncu_raw*.csv")):
        return "ascendopt"
    if (folder / "trace.json").is_file():
        return "ascendopt"
    if folder.name.startswith("PROF_") or folder.name == "mindstudio_profiler_output":
        return "msprof" if op_summaries(folder) else None
    if any(p.is_file() for pattern in ("op_summary*.csv", "mindstudio_profiler_output/op_summary*.csv")
           for p in folder.glob(pattern)):
        return "msprof"
    if block_csvs(folder) or (folder / "OpBasicInfo.csv").is_file() or _is_op_summary_jsonl(folder / "summary.jsonl"):
        return "msprof-op"
    return None


def find_runs(path: Path) -> list[Run]:
    """Runs at ``path``: itself, else its children, else its grandchildren; oldest first."""
    path = Path(path)
    odd = odd_entry(path)
    if odd:
        raise ProfileError(f"{path}: {odd}", hint="pass a profile folder or file")
    if not path.exists():
        raise ProfileError(f"{path}: no such file or folder")
    if path.is_file():
        return [Run(path, "file", stamp_of(path.name))]
    kind = kind_of_dir(path)
    if kind:
        return [Run(path, kind, stamp_of(path.name))]
    for depth in (1, 2):
        pattern = "*" if depth == 1 else "*/*"
        runs = []
        for child in sorted(path.glob(pattern)):
            if not child.is_dir():
                continue
            k = kind_of_dir(child)
            # a PROF_* folder inside an *_ascend_pt run belongs to that run, not a run of its own
            if k and not (k == "msprof" and kind_of_dir(child.parent) == "npu"):
                runs.append(Run(child, k, stamp_of(child.name)))
        if runs:
            return sorted(runs, key=Run.sort_key)
    for name in ("kernel_details.csv", "kernels.csv", "trace.json", "OpBasicInfo.csv"):
        entry = path / name
        odd = odd_entry(entry) or ("a folder, not a file" if entry.is_dir() else None)
        if odd:  # named like a profile's table, but nothing a profile can be read from
            raise ProfileError(f"{entry}: {odd}", hint="a profile's tables are regular files")
    raise ProfileError(
        f"{path}: no profile found (looked in it and two levels down for kernel_details*.csv, "
        "*_ascend_pt/ASCEND_PROFILER_OUTPUT, op_summary*.csv, PROF_*/mindstudio_profiler_output, OPPROF_* "
        "(OpBasicInfo.csv, per-block CSVs), kernels.csv / trace.json / ncu_raw*.csv)",
        hint="pass the folder `ascendopt collect` printed",
    )
