"""One loader per kind of run: files found in the run -> ``Profile`` (readers do the parsing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascendopt.analyze.traces import ALL_GROUPS, CUDA_GROUPS, Profile, _profile_yaml
from ascendopt.analyze.traces.ascend import finish_kernel_frame, read_block_table, read_kernel_table, read_op_statistic
from ascendopt.analyze.traces.columns import NCU_GROUPS, metric_groups_of
from ascendopt.analyze.traces.csvread import read_header
from ascendopt.analyze.traces.device import (
    MEASURED,
    Facts,
    offer_chip,
    offer_derived,
    offer_user_chip,
    read_hardware_info,
    read_info_json,
    read_op_info,
    read_profiler_info,
    run_rank,
)
from ascendopt.analyze.traces.discover import kernel_tables, op_summaries
from ascendopt.errors import ProfileError

PROFILE_SOURCE = "ascendopt_profile.yaml"


def scheduled_calls(meta: dict[str, Any]) -> int | None:
    """Calls of the workload an ascendopt collect recorded: its profiler schedule's active x repeat steps
    (``ascendopt_profile.yaml``); None without a schedule or with repeat 0 (until the end: unknown)."""
    schedule = (meta.get("profiler") or {}).get("schedule") if isinstance(meta.get("profiler"), dict) else None
    if not isinstance(schedule, dict):
        return None
    active, repeat = schedule.get("active"), schedule.get("repeat")
    if not isinstance(active, int) or not isinstance(repeat, int) or active < 1 or repeat < 1:
        return None
    return active * repeat


def _ascend_profile(kind: str, path: Path, frame, notes: list[str], run_dir: Path, *, op_statistic=None,
                    meta: dict[str, Any] | None = None, op_info: dict[str, Any] | None = None,
                    files: list[Path] | None = None) -> Profile:
    """Common tail of the Ascend loaders: device facts, metric groups, not-collected list."""
    meta = meta or {}
    facts = Facts()
    info = read_info_json(run_dir)
    if info:
        facts.offer(f"{MEASURED} ({info[1].relative_to(run_dir)})", **info[0])
    hardware = read_hardware_info(run_dir)
    if hardware:
        hw, hw_path = hardware
        files = [*(files or []), hw_path]
        source = f"{MEASURED} ({hw_path.name})"
        facts.offer(source, cube_cores=hw["cube_cores"], vector_cores=hw["vector_cores"], clock_mhz=hw["clock_mhz"])
        offer_chip(facts, hw["chip"], source)
    if op_info and op_info.get("current_freq_mhz"):
        facts.offer(f"{MEASURED} ({op_info['file']} Current Freq)", clock_mhz=op_info["current_freq_mhz"])
    device_meta = meta.get("device")
    if isinstance(device_meta, dict):
        offer_chip(facts, device_meta.get("chip") or device_meta.get("name"), PROFILE_SOURCE)
        facts.offer(PROFILE_SOURCE, cube_cores=device_meta.get("cube_cores"),
                    vector_cores=device_meta.get("vector_cores"))
    elif device_meta:
        offer_chip(facts, device_meta, PROFILE_SOURCE)
    offer_derived(facts, frame)
    offer_user_chip(facts)
    # what nothing measured stays unknown (issue 21: never a model chip's cores passed off as this one's)
    missing = [f for f in ("chip", "cube_cores", "vector_cores") if facts.values.get(f) is None]
    if missing:
        notes = notes + [f"device: {', '.join(missing)} not in the capture and not derivable; checks that need "
                         "them are skipped (set ASCENDOPT_CHIP to a configs/chips.yaml chip to supply them)"]
    pinfo = read_profiler_info(run_dir)
    groups = metric_groups_of(frame.columns)
    extra = {k: pinfo[k] for k in ("profiler_level", "aic_metrics", "rank_id", "cann_version", "torch_npu_version")
             if k in pinfo}
    return Profile(path=path, kernels=frame, device=facts.to_dict(**extra), metric_groups=groups,
                   not_collected=[g for g in ALL_GROUPS if g not in groups], kind=kind, op_statistic=op_statistic,
                   notes=notes, runs=[path], set_id=meta.get("set_id"), op_info=op_info, files=list(files or [path]),
                   scheduled_calls=scheduled_calls(meta))


def _rank_device(run_dir: Path) -> str:
    """Device label of rows without a ``Device_id``: the run's rank (``device.run_rank``), else npu:0."""
    rank = run_rank(run_dir)
    return f"npu:{rank}" if rank is not None else "npu:0"


def load_npu(run: Path) -> Profile:
    """A torch_npu ``*_ascend_pt`` folder or its ``ASCEND_PROFILER_OUTPUT`` folder."""
    out = run if run.name == "ASCEND_PROFILER_OUTPUT" or not (run / "ASCEND_PROFILER_OUTPUT").is_dir() \
        else run / "ASCEND_PROFILER_OUTPUT"
    run_dir = out.parent if out.name == "ASCEND_PROFILER_OUTPUT" else out
    tables = kernel_tables(out)
    device = _rank_device(run_dir)
    if tables:
        details = tables[0]
        frame, notes = read_kernel_table(details, device_default=device)
        if len(tables) > 1:
            notes.append(f"{out}: holds {len(tables)} kernel tables; read {details.name} "
                         f"(pass a file to read another: {', '.join(t.name for t in tables[1:4])})")
    else:
        summaries = op_summaries(run_dir)
        if not summaries:
            done = (out / "analyse.done").exists()
            raise ProfileError(
                f"{out}: no kernel_details.csv"
                + ("" if done else " (no analyse.done: the export may not have finished)"),
                hint="profile at Level0 or above with NPU activity, or run torch_npu.profiler.profiler.analyse()",
            )
        return load_msprof(run_dir, summaries)
    stats_path = out / "op_statistic.csv"
    stats = read_op_statistic(stats_path) if stats_path.is_file() else None
    return _ascend_profile("npu", run, frame, notes, run_dir, op_statistic=stats, meta=_profile_yaml(run_dir),
                           files=[details] + ([stats_path] if stats is not None else []))


def load_msprof(run: Path, summaries: list[Path]) -> Profile:
    """msprof command-line output: every ``op_summary_*.csv`` (one per device/slice), concatenated."""
    import pandas as pd

    frames, notes = [], []
    for path in summaries:
        dev = next((p.name.split("_", 1)[1] for p in path.parents if p.name.startswith("device_")), None)
        frame, more = read_kernel_table(path, device_default=f"npu:{dev}" if dev else "npu:0")
        frames.append(frame)
        notes += more
    frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    run_dir = next((p for p in [run, *run.parents] if p.name.startswith("PROF_")), run)
    return _ascend_profile("msprof", run, frame, notes, run_dir, files=summaries)


def load_msprof_op(run: Path, csvs: list[Path]) -> Profile:
    """``msprof op`` output of one operator: per-block CSVs (one per metric group) named by ``OpBasicInfo.csv``
    (or ``summary.jsonl``), device facts from ``HardwareInfo.jsonl``."""
    op_info = read_op_info(run)
    frame, notes = read_block_table(csvs, op_info=op_info, folder=run)
    if csvs:
        notes.append(f"{run.name}: msprof op data is per block; 'duration' is each block's core time"
                     + (f"; the task took {op_info['task_duration_us']:g} us ({op_info['file']})"
                        if op_info and op_info.get("task_duration_us") is not None else ""))
    info_file = [run / op_info["file"]] if op_info else []
    return _ascend_profile("msprof-op", run, frame, notes, run, op_info=op_info, files=info_file + csvs)


def load_ascendopt(folder: Path) -> Profile:
    """This tool's cuda / cpu profile folder: kernels.csv (or trace.json) plus ncu_raw*.csv."""
    from ascendopt.analyze.traces.ncu import merge_ncu_files, read_ncu_raw
    from ascendopt.analyze.traces.torch_trace import attach_ncu, read_chrome_trace, read_kernels_csv

    meta = _profile_yaml(folder)
    notes: list[str] = []
    ncu_paths = sorted(folder.glob("ncu_raw*.csv"))
    ncu = [read_ncu_raw(p) for p in ncu_paths]
    ncu_device = ncu[0][1] if ncu else {}
    if (folder / "kernels.csv").is_file():
        frame, notes = read_kernels_csv(folder / "kernels.csv")
    elif (folder / "trace.json").is_file():
        frame, notes = read_chrome_trace(folder / "trace.json")
    elif ncu:
        # no trace: ncu's replayed durations are all there is (clocks locked, caches flushed)
        frame = merge_ncu_files(ncu)
        notes.append("durations from ncu (replayed launches, clocks as ncu set them), no trace")
        ncu = []
    else:
        raise ProfileError(f"{folder}: no kernels.csv, trace.json or ncu_raw*.csv")
    if ncu:
        frame = attach_ncu(frame, merge_ncu_files(ncu))
    backend = str(meta.get("backend") or ("cuda" if (frame["core_type"].astype(str) == "cuda").any() else "cpu"))
    frame = finish_kernel_frame(frame, device_default=backend)
    facts = Facts()
    if ncu_device:
        facts.offer(f"ncu ({ncu_paths[0].name})", **ncu_device)
    device_meta = meta.get("device")
    if isinstance(device_meta, dict):
        offer_chip(facts, device_meta.get("chip") or device_meta.get("name"), PROFILE_SOURCE)
        if backend != "cpu":  # on cpu they are the interpreter's grid (configs/chips.yaml), no chip's cores
            facts.offer(PROFILE_SOURCE, cube_cores=device_meta.get("cube_cores"),
                        vector_cores=device_meta.get("vector_cores"))
    groups = [g for g, cols in NCU_GROUPS.items() if any(c in frame.columns and frame[c].notna().any() for c in cols)]
    # ncu's groups are requested on cuda only: on cpu none was, so none is "not collected"
    missing = [] if backend == "cpu" else [g for g in CUDA_GROUPS if g not in groups]
    if backend == "cpu":
        notes.append("cpu backend: the Triton interpreter has no hardware counters; durations are host time")
    return Profile(path=folder, kernels=frame, device=facts.to_dict(), metric_groups=groups,
                   not_collected=missing, kind=backend,
                   notes=notes, runs=[folder], set_id=meta.get("set_id"), scheduled_calls=scheduled_calls(meta))


def load_file(path: Path) -> Profile:
    """A single file: kernel_details / op_summary / op_statistic / block CSV / kernels.csv / ncu CSV / trace."""
    from ascendopt.analyze.traces.discover import block_csvs
    from ascendopt.analyze.traces.ncu import is_ncu_csv, read_ncu_raw

    name = path.name
    if name in ("OpBasicInfo.csv", "summary.jsonl", "HardwareInfo.jsonl"):
        return load_msprof_op(path.parent, block_csvs(path.parent))  # one file of an msprof op folder
    if name.endswith(".json"):
        from ascendopt.analyze.traces.torch_trace import read_chrome_trace

        frame, notes = read_chrome_trace(path)
        kind = "cuda" if (frame["core_type"].astype(str) == "cuda").any() else "cpu"
        return Profile(path=path, kernels=frame, device=Facts().to_dict(), metric_groups=[],
                       not_collected=list(CUDA_GROUPS) if kind == "cuda" else [], kind=kind, notes=notes, runs=[path])
    if is_ncu_csv(path):
        frame, dev, notes = read_ncu_raw(path)
        facts = Facts()
        facts.offer(f"ncu ({name})", **dev)
        groups = [g for g, cols in NCU_GROUPS.items() if any(c in frame.columns for c in cols)]
        return Profile(path=path, kernels=finish_kernel_frame(frame, device_default="cuda:0"), device=facts.to_dict(),
                       metric_groups=groups, not_collected=[g for g in CUDA_GROUPS if g not in groups], kind="cuda",
                       notes=notes, runs=[path])
    header = read_header(path)
    if name == "kernels.csv":
        return load_ascendopt(path.parent)
    if header and header[0] == "block_id":
        return load_msprof_op(path.parent, [path])
    if name == "op_statistic.csv":
        # op_statistic has no per-kernel rows; its kernel_details.csv sibling does
        sibling = path.parent / "kernel_details.csv"
        if not sibling.is_file():
            raise ProfileError(f"{path}: op_statistic.csv alone has no per-kernel rows; "
                               f"{sibling.name} is not beside it")
        path = sibling
        header = read_header(path)
    if "Op Name" in header:
        return load_msprof(path.parent, [path])
    run_dir = path.parent.parent if path.parent.name == "ASCEND_PROFILER_OUTPUT" else path.parent
    frame, notes = read_kernel_table(path, device_default=_rank_device(run_dir))
    stats_path = path.parent / "op_statistic.csv"
    stats = read_op_statistic(stats_path) if stats_path.is_file() else None
    return _ascend_profile("npu", path, frame, notes, run_dir, op_statistic=stats, meta=_profile_yaml(run_dir),
                           files=[path] + ([stats_path] if stats is not None else []))
