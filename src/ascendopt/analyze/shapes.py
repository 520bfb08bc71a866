"""The launches of a profile's kernels with their input shapes and dtypes: the data of ``analyze --shapes``
and of ``freeze --shapes-from`` (``contract.shapes`` buckets them into the served-shape mix).

Where the shapes come from, per profile (the reader picks the run ``analyze`` would read):

* torch_npu ``kernel_details.csv`` and msprof ``op_summary_*.csv``: the ``Input Shapes`` / ``Input Data
  Types`` columns, one ``;``-separated entry per input (``"8,4096,16,128;128"``, ``DT_BF16;FLOAT``; an
  empty entry is an input without dims: a scalar or an optional input left out). Only the needed columns
  are read (name, type, core, duration, shapes, dtypes). Rows whose shape is ``N/A`` count as launches
  without a shape: msprof writes ``N/A`` for Triton kernels (``main_kernel`` in the fixture
  ``msprof_op_summary``), so such a profile holds no served shapes.
* a torch.profiler chrome trace recorded with ``record_shapes=True``: an op event's ``args`` carry ``Input
  Dims`` (``[[8, 128], [128, 256], []]``) and ``Input type``; a device kernel event has no shapes of its
  own and takes those of the op that launched it (the op event with the same ``External id``). A launch
  range of the CPU interpreter (``user_annotation``) records none.
* Nsight Compute ``ncu --csv --page raw``: no tensor shapes at all (ncu records launches, not tensors);
  its grid and block sizes are listed as launch configurations instead.
* ``msprof op`` per-block CSVs describe one launch's blocks: no input shapes.

Durations are device time in microseconds (kernel_details / op_summary task duration, a trace's kernel
``dur``; for a CPU-only trace the op's host time, said in a note).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendopt.analyze.traces.faults import reader
from ascendopt.contract.shapes import MAX_BUCKETS, Shape, ShapeMix, ShapeRecord, build_mix
from ascendopt.errors import ProfileError, UsageError

# Canonical columns a shape extraction reads from a kernel table (``traces.columns`` maps the raw headers).
SHAPE_COLUMNS = ("name", "op_type", "core_type", "duration_us", "input_shapes", "input_dtypes")
_TEXT = {"name", "op_type", "core_type", "input_shapes", "input_dtypes"}
# Separators of the Ascend shape text: inputs, then dims within one input.
INPUT_SEP, DIM_SEP = ";", ","
# The dtype stored for an input the profile names no dtype for (an empty entry: an input left out).
NO_DTYPE = "none"
# torch.profiler chrome trace: the op event's args with the shapes and dtypes, and the key linking a
# device kernel to the op that launched it.
TRACE_DIMS, TRACE_TYPES, TRACE_LINK = "Input Dims", "Input type", "External id"
# Event categories of a torch.profiler trace that can be a kernel: device kernels, ops (aten::mm, custom
# ops), named ranges (the CPU interpreter's kernel launches; they record no shapes).
TRACE_KERNEL, TRACE_OP, TRACE_RANGE = "kernel", "cpu_op", "user_annotation"


@dataclass
class KernelShapes:
    """One kernel's launches. ``launches``/``device_us``: all of them (us); ``records``: those with a recorded
    shape, summed per distinct (shape, dtypes), heaviest first; ``launch_configs``: ``"grid G, block B"`` ->
    launches, where the profile records launch sizes (ncu, a CUDA trace)."""

    name: str
    launches: int = 0
    device_us: float = 0.0
    records: list[ShapeRecord] = field(default_factory=list)
    launch_configs: dict[str, int] = field(default_factory=dict)

    @property
    def shaped_us(self) -> float:
        """Device time of the launches with a recorded shape (us)."""
        return sum(r.device_us for r in self.records)


@dataclass
class ShapeProfile:
    """What ``read_shapes`` found: the files read (``sha256`` over their bytes in order: for one file, the
    file's own digest), the source format, the kernels (most device time first) and notes for people."""

    files: list[Path]
    sha256: str
    source: str  # kernel_details | op_summary | torch.profiler trace | ncu
    kernels: list[KernelShapes]
    notes: list[str] = field(default_factory=list)


def parse_ascend_shapes(text: Any) -> Shape | None:
    """``"8,4096,16,128;128"`` -> ``((8, 4096, 16, 128), (128,))``; an empty entry is ``()``; None for a
    missing cell (N/A) or text that is not integer dims."""
    if text is None or text != text:  # text != text: NaN, a missing cell
        return None
    try:
        return tuple(tuple(int(d) for d in part.split(DIM_SEP)) if part.strip() else ()
                     for part in str(text).strip().strip('"').split(INPUT_SEP))
    except ValueError:
        return None


def parse_ascend_dtypes(text: Any, inputs: int) -> tuple[str, ...]:
    """``"DT_BF16;FLOAT"`` -> ``("DT_BF16", "FLOAT")``, an empty entry ``NO_DTYPE``; ``()`` when missing
    or when the count differs from ``inputs`` (the shapes then stand without dtypes)."""
    if text is None or text != text:
        return ()
    parts = tuple(p.strip() or NO_DTYPE for p in str(text).strip().strip('"').split(INPUT_SEP))
    return parts if len(parts) == inputs else ()


def _trace_shape(dims: Any) -> Shape | None:
    """A trace's ``Input Dims`` (``[[8, 128], []]``) as a Shape; None when an input is not a flat list of
    integers (a TensorList input records a list of lists: no single shape)."""
    if not isinstance(dims, list) or not dims:
        return None
    out = []
    for d in dims:
        if not isinstance(d, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in d):
            return None
        out.append(tuple(d))
    return tuple(out)


class _Kernels:
    """Accumulates launches per kernel name."""

    def __init__(self) -> None:
        self.by_name: dict[str, KernelShapes] = {}
        self.shapes: dict[str, dict[tuple, list[float]]] = {}

    def add(self, name: str, duration_us: float, shape: Shape | None, dtypes: tuple[str, ...] = (),
            config: str | None = None, count: int = 1) -> None:
        k = self.by_name.setdefault(name, KernelShapes(name))
        k.launches += count
        k.device_us += duration_us
        if config:
            k.launch_configs[config] = k.launch_configs.get(config, 0) + count
        if shape is not None:
            acc = self.shapes.setdefault(name, {}).setdefault((shape, dtypes), [0, 0.0])
            acc[0] += count
            acc[1] += duration_us

    def result(self) -> list[KernelShapes]:
        for name, k in self.by_name.items():
            k.records = sorted((ShapeRecord(s, d, int(n), us) for (s, d), (n, us) in self.shapes.get(name, {}).items()),
                               key=lambda r: (-r.device_us, -r.launches, r.shapes))
        return sorted(self.by_name.values(), key=lambda k: (-k.device_us, k.name))


@reader
def _kernel_table_shapes(path: Path, kernels: _Kernels, matches) -> list[str]:
    """kernel_details.csv / op_summary CSV rows of matching kernels into ``kernels``; returns notes."""
    import numpy as np

    from ascendopt.analyze.traces.ascend import DURATION_HEADERS, NAME_HEADERS, unquoted
    from ascendopt.analyze.traces.columns import canonical
    from ascendopt.analyze.traces.csvread import read_columns, read_header

    header = read_header(path)
    if not any(h in header for h in NAME_HEADERS) or not any(h in header for h in DURATION_HEADERS):
        raise ProfileError(f"{path}: missing the kernel name or task duration column",
                           hint="is this a kernel_details.csv / op_summary CSV?")
    wanted = {raw: canonical(raw) for raw in header if raw and canonical(raw) in SHAPE_COLUMNS}
    frame, notes = read_columns(path, wanted, _TEXT)
    if "input_shapes" not in frame.columns:
        raise ProfileError(f"{path}: no 'Input Shapes' column (a Level0 kernel_details.csv, or an export without "
                           "shapes)", hint="profile with record_shapes=True at Level1 or above")
    names = frame["name"].astype(str)
    op_types = frame["op_type"].astype(str) if "op_type" in frame.columns else names
    keep = np.array([matches(n, t) for n, t in zip(names, op_types, strict=True)], dtype=bool)
    keep &= frame["duration_us"].notna().to_numpy()
    rows = frame[keep]
    shapes = unquoted(rows["input_shapes"]).astype("object") if len(rows) else []
    dtypes = (unquoted(rows["input_dtypes"]).astype("object") if "input_dtypes" in rows.columns and len(rows)
              else [None] * len(rows))
    for name, us, text, types in zip(names[keep], rows["duration_us"], shapes, dtypes, strict=True):
        shape = parse_ascend_shapes(text)
        kernels.add(name, float(us), shape, parse_ascend_dtypes(types, len(shape)) if shape else ())
    return notes


@reader
def _trace_shapes(path: Path, kernels: _Kernels, matches) -> list[str]:
    """A torch.profiler chrome trace's matching kernels into ``kernels``; returns notes."""
    from ascendopt.analyze.traces.torch_trace import STEP_PREFIX, complete_events

    events = complete_events(path)
    ops = {e["args"].get(TRACE_LINK): e["args"] for e in events
           if e.get("cat") == TRACE_OP and isinstance(e.get("args"), dict) and TRACE_DIMS in e["args"]}
    by_cat: dict[str, list[dict]] = {TRACE_KERNEL: [], TRACE_OP: [], TRACE_RANGE: []}
    for e in events:
        cat, name = e.get("cat"), str(e.get("name", ""))
        if cat in by_cat and not name.startswith(STEP_PREFIX) and matches(name, name):
            by_cat[cat].append(e)
    # device kernels when any match; else ops (a CPU-only trace); else named launch ranges
    cat = next((c for c in (TRACE_KERNEL, TRACE_OP, TRACE_RANGE) if by_cat[c]), TRACE_KERNEL)
    notes = []
    if cat == TRACE_OP:
        notes.append(f"{path.name}: no device kernel matched; op events measured in host time (a CPU-only trace)")
    if cat == TRACE_RANGE:
        notes.append(f"{path.name}: the matching events are named launch ranges, which record no input shapes")
    if not ops and cat != TRACE_RANGE:
        notes.append(f"{path.name}: no op event carries '{TRACE_DIMS}' (recorded without record_shapes=True?)")
    for e in by_cat[cat]:
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        source = args if TRACE_DIMS in args else ops.get(args.get(TRACE_LINK), {})
        shape = _trace_shape(source.get(TRACE_DIMS))
        types = source.get(TRACE_TYPES)
        dtypes = (tuple(str(t) or NO_DTYPE for t in types)
                  if shape and isinstance(types, list) and len(types) == len(shape) else ())
        grid, block = args.get("grid"), args.get("block")
        config = f"grid {_dims_text(grid)}, block {_dims_text(block)}" if grid and block else None
        kernels.add(str(e["name"]), float(e["dur"]), shape, dtypes, config)
    return notes


def _dims_text(value: Any) -> str:
    return " x ".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _ncu_launches(path: Path, kernels: _Kernels, matches) -> list[str]:
    """ncu launch records: grid/block sizes and replayed durations, no tensor shapes."""
    from ascendopt.analyze.traces.ncu import read_ncu_raw

    frame, _, _ = read_ncu_raw(path)
    missing = [float("nan")] * len(frame)
    grids = frame["block_dim"].tolist() if "block_dim" in frame.columns else missing  # launch__grid_size
    blocks = frame["block_size"].tolist() if "block_size" in frame.columns else missing  # launch__block_size
    for name, us, grid, block in zip(frame["name"], frame["duration_us"], grids, blocks, strict=True):
        if matches(str(name), str(name)):
            known = not (math.isnan(grid) or math.isnan(block))
            kernels.add(str(name), float(us), None, (), f"grid {grid:g}, block {block:g}" if known else None)
    return [f"{path.name}: Nsight Compute records launches, not tensors: no input shapes (grid and block sizes "
            "are listed instead; durations are ncu's replayed launches)"]


def _files(path: Path) -> tuple[str, list[Path]]:
    """The source format and the files a shape extraction reads for ``path`` (the run analyze reads)."""
    from ascendopt.analyze.traces.discover import find_runs, kernel_tables, op_summaries
    from ascendopt.analyze.traces.ncu import is_ncu_csv

    run = find_runs(path)[-1]
    where = run.path
    if run.kind == "file":
        if where.suffix == ".json":
            return "torch.profiler trace", [where]
        if is_ncu_csv(where):
            return "ncu", [where]
        if where.name == "op_statistic.csv":
            raise ProfileError(f"{where}: op_statistic.csv sums per op type: no input shapes",
                               hint="pass the kernel_details.csv beside it")
        from ascendopt.analyze.traces.csvread import read_header

        return ("op_summary" if "Op Name" in read_header(where) else "kernel_details"), [where]
    if run.kind == "npu":
        out = where / "ASCEND_PROFILER_OUTPUT" if (where / "ASCEND_PROFILER_OUTPUT").is_dir() else where
        tables = kernel_tables(out)
        if tables:
            return "kernel_details", tables[:1]
        run_dir = out.parent if out.name == "ASCEND_PROFILER_OUTPUT" else out
        if op_summaries(run_dir):
            return "op_summary", op_summaries(run_dir)
        raise ProfileError(f"{out}: no kernel_details.csv or op_summary CSV")
    if run.kind == "msprof":
        return "op_summary", op_summaries(where)
    if run.kind == "ascendopt":
        if (where / "trace.json").is_file():
            return "torch.profiler trace", [where / "trace.json"]
        ncu = sorted(where.glob("ncu_raw*.csv"))
        if ncu:
            return "ncu", ncu[:1]
        raise ProfileError(f"{where}: no trace.json: kernels.csv records no input shapes")
    raise ProfileError(f"{where}: msprof op data describes the blocks of one launch: no input shapes",
                       hint="profile the model with torch_npu (kernel_details.csv) or msprof (op_summary)")


def read_shapes(path: str | Path, kernel_filter: str | None = None) -> ShapeProfile:
    """The launches of the kernels matching ``kernel_filter`` (all kernels when None) with their input
    shapes, from the profile at ``path`` (a run folder, a parent of runs: the newest, or a file).

    ``kernel_filter`` follows ``analyze.matching`` (substring of the name or op type, or ``regex:EXPR``).
    ProfileError (exit 2) for a file that cannot be read; UsageError naming close names when the filter
    matches no kernel.
    """
    from ascendopt.analyze.matching import name_matcher

    match = name_matcher(kernel_filter) if kernel_filter else None

    def matches(name: str, op_type: str) -> bool:
        return match is None or match(name) or match(op_type)

    source, files = _files(Path(path))
    kernels = _Kernels()
    notes: list[str] = []
    for file in files:
        if source == "torch.profiler trace":
            notes += _trace_shapes(file, kernels, matches)
        elif source == "ncu":
            notes += _ncu_launches(file, kernels, matches)
        else:
            notes += _kernel_table_shapes(file, kernels, matches)
    found = kernels.result()
    if kernel_filter and not found:
        raise UsageError(f"--kernel-filter {kernel_filter!r} matches no kernel in {', '.join(map(str, files))}",
                         hint="`ascendopt analyze PROFILE` lists the kernel names")
    if not found:
        raise ProfileError(f"{path}: no kernel launch with a duration")
    return ShapeProfile(files=files, sha256=_digest(files), source=source, kernels=found, notes=notes)


def _digest(files: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def mix_from_profile(path: str | Path, kernel_filter: str) -> tuple[ShapeMix, ShapeProfile]:
    """The served-shape mix of the kernels matching ``kernel_filter`` (the contract's target kernel) in the
    profile at ``path``: every matching kernel's launches bucketed together (``contract.shapes.build_mix``),
    the source the file(s) read and their sha256. UsageError (exit 2) when no launch recorded a shape."""
    found = read_shapes(path, kernel_filter)
    records = [r for k in found.kernels for r in k.records]
    total_us = sum(k.device_us for k in found.kernels)
    names = ", ".join(k.name for k in found.kernels[:4]) + (" ..." if len(found.kernels) > 4 else "")
    if not records:
        raise UsageError(f"{', '.join(map(str, found.files))}: the {sum(k.launches for k in found.kernels)} launch(es) "
                         f"of {names} record no input shapes ({found.source}"
                         + (": Input Shapes is N/A" if found.source in ("kernel_details", "op_summary") else "")
                         + ")", hint="profile with record_shapes=True (torch_npu, or torch.profiler), or write the "
                                     "mix by hand: --shapes-file MIX.yaml (docs/shapes.md)")
    path_text = str(found.files[0]) if len(found.files) == 1 else str(Path(path))
    mix = build_mix(kernel_filter, records, kernel_us=total_us,
                    source={"kind": "profile", "path": path_text, "sha256": found.sha256})
    return mix, found


def shape_report(found: ShapeProfile, *, top: int | None = None,
                 shapes_per_kernel: int = MAX_BUCKETS) -> dict[str, Any]:
    """``analyze --shapes`` data (its ``--json``): per kernel (the ``top`` with most device time; None: all),
    its launches and device time, the share of it with a recorded shape, and its distinct shapes heaviest
    first (at most ``shapes_per_kernel``, as many as a mix has buckets; the rest summed in ``other``), plus
    launch configurations where the profile has them."""
    kernels = []
    for k in found.kernels[:top] if top else found.kernels:
        shown = k.records[:shapes_per_kernel]
        rest = k.records[shapes_per_kernel:]
        kernels.append({
            "name": k.name, "launches": k.launches, "device_us": round(k.device_us, 3),
            "shaped_share": round(k.shaped_us / k.device_us, 6) if k.device_us > 0 else 0.0,
            "distinct_shapes": len(k.records),
            "shapes": [{"shapes": [list(d) for d in r.shapes], "dtypes": list(r.dtypes), "launches": r.launches,
                        "device_us": round(r.device_us, 3),
                        "share": round(r.device_us / k.device_us, 6) if k.device_us > 0 else 0.0} for r in shown],
            "other": {"distinct_shapes": len(rest), "launches": sum(r.launches for r in rest),
                      "device_us": round(sum(r.device_us for r in rest), 3)},
            "launch_configs": dict(sorted(k.launch_configs.items(), key=lambda kv: -kv[1])),
        })
    return {"schema": 1, "profile": str(found.files[0]), "files": [str(f) for f in found.files],
            "source": found.source, "sha256": found.sha256, "notes": list(found.notes),
            "kernel_count": len(found.kernels), "kernels": kernels}


def served_mix(kernel_filter: str, *, profile: str | Path | None = None,
               mix_file: str | Path | None = None) -> tuple[ShapeMix, list[str]]:
    """The mix ``freeze`` stores: from a profile (``--shapes-from``: the launches of the kernels matching
    ``kernel_filter``) or a hand-written YAML file (``--shapes-file``); exactly one of the two. Returns the
    mix and the lines freeze says (what was read, what the mix covers)."""
    from ascendopt.contract.shapes import describe, load_mix

    if (profile is None) == (mix_file is None):
        raise UsageError("give one of --shapes-from PROFILE or --shapes-file MIX.yaml")
    if mix_file is not None:
        mix = load_mix(mix_file)
        return mix, [f"freeze: served shapes from {mix_file} (hand-written): {describe(mix)}"]
    mix, found = mix_from_profile(profile, kernel_filter)
    matched = ", ".join(k.name for k in found.kernels if k.records)
    lines = [f"note: {n}" for n in found.notes]
    lines.append(f"freeze: served shapes from {', '.join(map(str, found.files))} ({found.source}; kernels {matched}): "
                 f"{describe(mix)}")
    return mix, lines
