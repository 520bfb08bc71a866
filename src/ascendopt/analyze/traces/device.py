"""Device facts for a profile: chip, cube/vector core counts, clock — and where each came from.

Order of trust (docs/profiler-formats.md §3, §6.5, §11.4):
1. the profiler's own files: ``PROF_*/device_*/info.json.*`` (``ai_core_num``, ``aiv_num``,
   ``aic_frequency``) on Ascend, ``device__attribute_*`` columns in an ncu CSV on CUDA;
2. ``ascendopt_profile.yaml``'s ``device`` name looked up in ``configs/chips.yaml``;
3. derived from the kernel table (clock = cycles / blocks / core time, cube cores from
   ``cube_utilization(%)``; vector cores = 2 x cube cores, the A2 pairing of §6.4);
4. ``configs/chips.yaml``'s model chip, said to be an assumption.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

FIELDS = ("chip", "cube_cores", "vector_cores", "clock_mhz")


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


def read_info_json(run_dir: Path) -> tuple[dict[str, Any], Path] | None:
    """First ``PROF_*/device_*/info.json.*`` under a run folder: DeviceInfo[0] facts and its path."""
    for path in sorted(run_dir.glob("PROF_*/device_*/info.json.*")) + sorted(run_dir.glob("device_*/info.json.*")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            info = (data.get("DeviceInfo") or [{}])[0]
        except (OSError, ValueError, AttributeError, IndexError):
            continue
        # msprof writes numbers as strings here ("aic_frequency": "1850"), core counts as ints
        facts = {
            "cube_cores": _int(info.get("ai_core_num")),
            "vector_cores": _int(info.get("aiv_num")),
            "clock_mhz": _int(info.get("aic_frequency")),
        }
        return facts, path
    return None


def read_profiler_info(run_dir: Path) -> dict[str, Any]:
    """``profiler_info*.json``: metric group, profiler level, rank and versions (empty if absent)."""
    for path in sorted(run_dir.glob("profiler_info*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
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
    except UsageError:
        facts.offer(source, chip=str(name))
        return
    facts.offer(source, chip=str(name))
    facts.offer(f"configs/chips.yaml ({name})", cube_cores=chip.get("cube_cores"),
                vector_cores=chip.get("vector_cores"), clock_mhz=chip.get("clock_mhz"))


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


def offer_model_chip(facts: Facts) -> None:
    """Last resort: the model chip of configs/chips.yaml, named as an assumption."""
    from ascendopt.device.config import chip_facts, default_model_chip

    name = default_model_chip()
    chip = chip_facts(name)
    source = f"assumed: configs/chips.yaml default_model_chip {name} (not measured)"
    facts.offer(source, cube_cores=chip.get("cube_cores"), vector_cores=chip.get("vector_cores"),
                clock_mhz=chip.get("clock_mhz"))
