"""Device facts for a profile: chip, cube/vector core counts, clock — and where each came from.

Order of trust (docs/profiler-formats.md §3, §6.5, §11.4):
1. the profiler's own files, "measured from the capture": ``PROF_*/device_*/info.json.*``
   (``ai_core_num``, ``aiv_num``, ``aic_frequency``) on Ascend; ``msprof op``'s ``HardwareInfo.jsonl``
   (chip, cube / vector core counts, core clock) and ``OpBasicInfo.csv`` / ``summary.jsonl``'s
   ``Current Freq``; ``device__attribute_*`` columns in an ncu CSV on CUDA;
2. ``ascendopt_profile.yaml``'s ``device`` name looked up in ``configs/chips.yaml``;
3. derived from the kernel table (clock = cycles / blocks / core time, cube cores from
   ``cube_utilization(%)``; vector cores = 2 x cube cores, the A2 pairing of §6.4);
4. ``$ASCENDOPT_CHIP`` (a chip the user names) looked up in ``configs/chips.yaml``.
Nothing else: a fact nobody measured stays unknown (never a model chip's value passed off as this one's).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from ascendopt.analyze.traces.faults import reader

MEASURED = "measured from the capture"

# hbm_gbs: the chip's peak device-memory bandwidth (GB/s), from configs/chips.yaml only (no profiler records it)
FIELDS = ("chip", "cube_cores", "vector_cores", "clock_mhz", "hbm_gbs")


class Facts:
    """Collects device facts; the first source to give a field wins."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {f: None for f in FIELDS}
        self.sources: dict[str, str] = {}

    def offer(self, source: str, **values: Any) -> None:
        for key, value in values.items():
            if value is None or self.values.get(key) is not None:
                continue
            self.values[key] = value
            self.sources[key] = source

    def complete(self) -> bool:
        return all(self.values[f] is not None for f in FIELDS)

    def to_dict(self, **extra: Any) -> dict[str, Any]:
        distinct = list(dict.fromkeys(self.sources.values()))
        out = dict(self.values)
        out["source"] = "; ".join(distinct) if distinct else "unknown"
        out["sources"] = dict(self.sources)
        out.update(extra)
        return out


def _int(value: Any) -> int | None:
    try:
        return int(float(str(value).replace(",", "")))
    except (TypeError, ValueError):
        return None


@reader
def read_info_json(run_dir: Path) -> tuple[dict[str, Any], Path] | None:
    """First ``PROF_*/device_*/info.json.*`` under a run folder: DeviceInfo[0] facts and its path."""
    for path in sorted(run_dir.glob("PROF_*/device_*/info.json.*")) + sorted(run_dir.glob("device_*/info.json.*")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            info = (data.get("DeviceInfo") or [{}])[0]
        except (OSError, ValueError, AttributeError, IndexError, TypeError, KeyError):
            continue
        if not isinstance(info, dict):
            continue  # an optional facts file of another shape: skipped like an unreadable one
        # msprof writes numbers as strings here ("aic_frequency": "1850"), core counts as ints
        facts = {
            "cube_cores": _int(info.get("ai_core_num")),
            "vector_cores": _int(info.get("aiv_num")),
            "clock_mhz": _int(info.get("aic_frequency")),
        }
        return facts, path
    return None


@reader
def read_profiler_info(run_dir: Path) -> dict[str, Any]:
    """``profiler_info*.json``: metric group, profiler level, rank and versions (empty if absent)."""
    for path in sorted(run_dir.glob("profiler_info*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("config") or {}, dict) or \
                not isinstance((data.get("config") or {}).get("experimental_config") or {}, dict):
            continue  # an optional facts file of another shape: skipped like an unreadable one
        # older torch_npu builds prefix every key with "_" (_aic_metrics, _profiler_level)
        exp = (data.get("config") or {}).get("experimental_config") or {}
        out = {
            "aic_metrics": exp.get("_aic_metrics") or exp.get("aic_metrics"),
            "profiler_level": exp.get("_profiler_level") or exp.get("profiler_level"),
            "rank_id": data.get("rank_id"),
            "cann_version": data.get("cann_version"),
            "torch_npu_version": data.get("torch_npu_version"),
            "file": path.name,
        }
        return {k: v for k, v in out.items() if v is not None}
    return {}


_RANK_FILE = re.compile(r"^profiler_info_(\d+)\.json$")
_RANK_DIR = re.compile(r"^rank_?(\d+)(?:_|$)")


def run_rank(run_dir: Path) -> int | None:
    """The rank a torch_npu run was collected on: ``rank_id`` of its profiler_info (-1 = not
    distributed), else the ``{rank}`` of ``profiler_info_{rank}.json``, else a ``rank<N>_`` folder
    name prefix (how per-rank folders are often named when gathered); None when nothing says."""
    rank = read_profiler_info(run_dir).get("rank_id")
    try:
        if rank is not None and int(rank) >= 0:
            return int(rank)
    except (TypeError, ValueError):
        pass
    for path in sorted(run_dir.glob("profiler_info_*.json")):
        m = _RANK_FILE.match(path.name)
        if m:
            return int(m.group(1))
    m = _RANK_DIR.match(run_dir.name)
    return int(m.group(1)) if m else None


def offer_chip(facts: Facts, name: str | None, source: str) -> None:
    """Facts for a named chip from configs/chips.yaml (unknown names are ignored)."""
    if not name:
        return
    from ascendopt.device.config import chip_facts
    from ascendopt.errors import UsageError

    try:
        chip = chip_facts(str(name))
    except UsageError:  # a chip configs/chips.yaml does not list: named as it is, its facts stay unknown
        facts.offer(source, chip=str(name))
        return
    facts.offer(source, chip=str(name))
    facts.offer(f"configs/chips.yaml ({name})", cube_cores=chip.get("cube_cores"),
                vector_cores=chip.get("vector_cores"), clock_mhz=chip.get("clock_mhz"), hbm_gbs=chip.get("hbm_gbs"))


def offer_derived(facts: Facts, frame) -> None:
    """Back-solve clock and cube cores from an Ascend kernel table (§6.5)."""
    from ascendopt.analyze.traces.ascend import clock_from_cycles, cube_cores_from_utilization

    clock = clock_from_cycles(frame)
    if clock:
        facts.offer("derived: cycles / blocks / core time", clock_mhz=clock)
    # the core count needs a clock: the profiler's own (info.json) beats the back-solved one
    clock = facts.values.get("clock_mhz") or clock
    cores = cube_cores_from_utilization(frame, clock) if clock else None
    if cores:
        facts.offer("derived: cube_utilization(%) with the clock", cube_cores=cores)
        facts.offer("derived: 2 x cube cores (A2 pairs two vector cores per AI core)", vector_cores=2 * cores)


def offer_user_chip(facts: Facts) -> None:
    """Last resort: the chip the user names in ``$ASCENDOPT_CHIP`` (the variable ``device`` reads too)."""
    from ascendopt.device.config import user_chip

    name = user_chip()  # an unknown name is a usage error (exit 2), as for --chip
    if name:
        offer_chip(facts, name, "$ASCENDOPT_CHIP")


def chip_name(raw: str) -> str | None:
    """A chip name as the capture writes it -> the configs/chips.yaml spelling, or None when empty.

    ``"Ascend950PR_9599 V100"`` / ``"Ascend 950PR_9599 V100"`` -> ``"Ascend950PR_9599"`` (HardwareInfo.jsonl
    writes the SoC name, a space, then the chip version).
    """
    text = re.sub(r"\s+V\d+\S*$", "", str(raw or "").strip())
    text = re.sub(r"^Ascend\s+", "Ascend", text)
    return text or None


def _positive(value: Any) -> int | None:
    """A count / frequency from a hardware record; 0, "" and non-numbers mean "the query failed" -> None."""
    if isinstance(value, list):  # ai_core_frequency_MHZ: [cube, vector]
        value = value[0] if value else None
    number = _int(value)
    return number if number and number > 0 else None


@reader
def read_hardware_info(folder: Path) -> tuple[dict[str, Any], Path] | None:
    """``HardwareInfo.jsonl`` of an ``msprof op`` capture (the folder or its parent): chip, core counts, clock.

    One JSON object per line, by ``category``; keys are spelled ``"ai cube count"`` or ``"ai_cube_count"``
    depending on the release (both read). Returns (facts, path) or None when there is no readable file.
    """
    for path in (folder / "HardwareInfo.jsonl", folder.parent / "HardwareInfo.jsonl"):
        if not path.is_file():
            continue
        records: dict[str, dict[str, Any]] = {}
        try:
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.strip():
                    rec = json.loads(line)
                    if isinstance(rec, dict):
                        norm = {re.sub(r"[\s_]+", " ", str(k)).strip().lower(): v for k, v in rec.items()}
                        records[str(norm.get("category", "")).lower()] = norm
        except (OSError, ValueError):
            continue
        device, core = records.get("device info", {}), records.get("ai core information", {})
        clock = next((core[k] for k in ("ai cube frequency(mhz)", "ai core frequency mhz", "ai core frequency(mhz)")
                      if k in core), None)
        facts = {"chip": chip_name(device.get("chip info", "")),
                 "cube_cores": _positive(core.get("ai cube count")),
                 "vector_cores": _positive(core.get("ai vector count")),
                 "clock_mhz": _positive(clock)}
        return facts, path
    return None


_OP_INFO_KEYS = {"Op Name": "name", "Op Type": "kind", "Task Duration(us)": "task_duration_us",
                 "Block Dim": "block_dim", "Mix Block Dim": "mix_block_dim", "Device Id": "device_id",
                 "Current Freq": "current_freq_mhz", "Rated Freq": "rated_freq_mhz"}


def _op_info_value(key: str, value: Any) -> Any:
    if value is None or str(value).strip() in ("", "NA", "N/A", "null"):
        return None
    if key in ("name", "kind"):
        return str(value).strip()
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if key == "task_duration_us" else int(number)


@reader
def read_op_info(folder: Path) -> dict[str, Any] | None:
    """The operator an ``msprof op`` folder measured: ``OpBasicInfo.csv``, else ``summary.jsonl``'s
    ``OpInfoSummary`` record.

    Returns ``{name, kind (cube / vector / mix), task_duration_us, block_dim, mix_block_dim, device_id,
    current_freq_mhz, rated_freq_mhz, file, summary_metrics}`` (missing values None; ``summary_metrics``:
    summary.jsonl's per-section task averages by raw column name), or None when neither file is readable.
    """
    basic = folder / "OpBasicInfo.csv"
    row: dict[str, Any] | None = None
    if basic.is_file():
        try:
            with open(basic, encoding="utf-8", errors="replace", newline="") as f:
                rows = [r for r in csv.reader(f) if any(c.strip() for c in r)]
        except OSError:
            rows = []
        if len(rows) >= 2:
            header = [h.strip() for h in rows[0]]
            row = dict(zip(header, rows[1], strict=False))
            row["file"] = basic.name
    summary = folder / "summary.jsonl"
    sections: dict[str, Any] = {}  # the PMU section records' task-level averages, raw metric name -> value
    if summary.is_file():
        try:
            for line in summary.read_text(encoding="utf-8", errors="replace").splitlines():
                rec = json.loads(line) if line.strip() else None
                if not isinstance(rec, dict):
                    continue
                if rec.get("category") == "OpInfoSummary":
                    row = row or dict(rec, file=summary.name)
                else:
                    sections.update({k: v for k, v in rec.items() if k != "category"})
        except (OSError, ValueError):
            pass
    if row is None:
        return None
    info = {canon: _op_info_value(canon, row.get(raw)) for raw, canon in _OP_INFO_KEYS.items()}
    info["file"] = row["file"]
    info["summary_metrics"] = {k: v for k, v in sections.items() if isinstance(v, (int, float))}
    return info
