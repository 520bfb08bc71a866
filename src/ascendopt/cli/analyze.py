"""`ascendopt analyze PATH`: hotspots, bottleneck class with evidence, levers; `--compare` diffs two profiles."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ascendopt.cli.options import CsvOpt, JsonOpt, examples

DEFAULT_TOP = 15  # kernels a printed report lists, hottest first (`--top`; `collect --analyze` uses it too)


SHAPE_WIDTH = 32  # input shapes in a table, cut from the middle (the evidence lines print them whole)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) >= 1 else f"{value:.{digits}f}"
    return str(value)


def _short(name: str, width: int = 48) -> str:
    """``name`` cut from the middle to ``width`` characters: its head and its tail (where kernel names differ:
    ``…FlashAttentionScore`` vs ``…FlashAttentionScore_varlen``) stay."""
    if len(name) <= width:
        return name
    tail = (width - 1) // 2
    return name[: width - 1 - tail] + "…" + name[len(name) - tail:]


def fit_names(names: list[str], width: int) -> list[str]:
    """Names shortened from the middle to ``width``, never two printed alike: when shortening would make two
    different names look the same, the names are printed whole (the table wraps them)."""
    short = [_short(n, max(width, 12)) for n in names]
    distinct_in, distinct_out = len(set(names)), len(set(short))
    return short if distinct_out == distinct_in else list(names)


def _name_width(other_cells: list[list[str]], headers: list[str]) -> int:
    """Characters left for the kernel-name column of a table whose other columns hold ``other_cells`` (rows),
    on this terminal (rich's width: the terminal's, or $COLUMNS, or 80 when not a terminal)."""
    from ascendopt import console

    widths = [len(h) for h in headers]
    for row in other_cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    borders = 3 * (len(headers) + 1) + 1  # "│ " / " │ " between columns, a border each side
    return max(24, console.stdout().width - sum(widths) - borders)


def _table(headers: list[str], names: list[str], other: list[list[str]], *, title: str,
           justify: list[str] | None = None) -> None:
    """A table whose first column is the kernel name, fitted to the terminal width."""
    from ascendopt import console

    shown = fit_names(names, _name_width(other, headers[1:]))
    console.table(headers, [[n, *row] for n, row in zip(shown, other, strict=True)], title=title, justify=justify)


def _bandwidth_text(metrics: dict[str, Any]) -> str:
    """Every collected bandwidth of a kernel (canonical columns ending in ``_gbs``, GB/s) as
    ``l0a_read 19.2, l0a_write 28.8, ...``, in the profile's column order; "" when none was collected."""
    return ", ".join(f"{column.removesuffix('_gbs').removesuffix('_bw').replace('_bw_', '_')} {value:.1f}"
                     for column, value in metrics.items() if column.endswith("_gbs") and value is not None)


def render_report(report: dict[str, Any]) -> None:
    """Print an ``analyze.diagnosis.analyze`` report: notes (stderr), then device, metric groups and kernel
    time lines, the hotspots and bottlenecks tables and each kernel's evidence and levers (stdout).

    Shared by ``analyze`` and ``collect --analyze`` so both print a report the same way.
    """
    from ascendopt import console
    from ascendopt.analyze.traces.columns import ANALYZE_TABLE_METRICS

    for note in report["notes"]:
        console.status(note)
    dev = report["device"]
    files = report.get("files") or []
    console.out(f"profile: {report['profile']} ({report['kind']})"
                + (f"; read: {', '.join(files[:4])}" + (f" and {len(files) - 4} more" if len(files) > 4 else "")
                   if files else ""))

    def known(value, unit: str = "") -> str:
        if value is None:
            return "unknown"
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return f"{value}{unit}"

    if report["kind"] == "cpu":  # the host runs the interpreter: no chip, so no core counts, clock or HBM to claim
        console.out(f"device: {known(dev.get('chip'))}, host CPU: no accelerator cores, clock or HBM peak; "
                    f"source: {dev.get('source')}")
    else:
        console.out(f"device: chip {known(dev.get('chip'))}, cube cores {known(dev.get('cube_cores'))}, vector "
                    f"cores {known(dev.get('vector_cores'))}, clock {known(dev.get('clock_mhz'), ' MHz')}, HBM peak "
                    f"{known(dev.get('hbm_gbs'), ' GB/s')}; source: {dev.get('source')}")
    op = report.get("op_info")
    if op:
        console.out(f"operator: {op.get('name')} ({op.get('kind') or 'kind unknown'}), task duration "
                    f"{known(op.get('task_duration_us'), ' us')}, block dim {known(op.get('block_dim'))}, mix block "
                    f"dim {known(op.get('mix_block_dim'))}, clock {known(op.get('current_freq_mhz'), ' MHz')} (rated "
                    f"{known(op.get('rated_freq_mhz'), ' MHz')}); from {op.get('file')}")
    if report["kind"] == "cpu" and not report["metric_groups"] and not report["not_collected"]:
        console.out("metric groups: none (the cpu backend has no hardware counters to request)")
    else:
        console.out(f"metric groups: {', '.join(report['metric_groups']) or 'none'}; not collected: "
                    f"{', '.join(report['not_collected']) or 'none'}")
    totals = ", ".join(f"{d} {console.duration_text(t, digits=1)}" for d, t in report["total_us"].items())
    console.out(f"device kernel time: {totals} over {console.plural(report['kernel_count'], 'kernel')}")
    _render_profile_checks(report)
    kernels = report["kernels"]
    by_shape = report.get("by") == "shape"
    with_bw = any(k.get("achieved_bw_gbs") is not None for k in kernels)
    headers = ["kernel", "core", *(["input shapes"] if by_shape else []), "count", "total us", "avg us", "share",
               *(["GB/s (of HBM peak)"] if with_bw else [])]
    other = []
    for k in kernels:
        bw = k.get("achieved_bw_gbs")
        ratio = k.get("hbm_peak_ratio")
        other.append([k["core_type"], *([_short(k.get("input_shapes") or "-", SHAPE_WIDTH)] if by_shape else []),
                      str(k["count"]), f"{k['total_us']:.2f}", f"{k['avg_us']:.2f}", f"{100 * k['share']:.1f}%",
                      *([("-" if bw is None else f"{bw:.1f}" + (f" ({100 * ratio:.0f}%)" if ratio is not None
                                                               else ""))] if with_bw else [])])
    _table(headers, [k["name"] for k in kernels], other, title="hotspots",
           justify=["left", "left", *(["left"] if by_shape else []), "right", "right", "right", "right",
                    *(["right"] if with_bw else [])])
    shown = [(h, c) for h, c in ANALYZE_TABLE_METRICS if any(k["metrics"].get(c) is not None for k in kernels)]
    _table(["kernel", *(["input shapes"] if by_shape else []), "class", *(h for h, _ in shown)],
           [k["name"] for k in kernels],
           [[*([_short(k.get("input_shapes") or "-", SHAPE_WIDTH)] if by_shape else []), k["bound"],
             *(_fmt(k["metrics"].get(c)) for _, c in shown)] for k in kernels],
           title="bottlenecks" + ("" if shown else " (no hardware counters on cpu)" if report["kind"] == "cpu"
                                 else " (pipe counters not collected)"))
    said: dict[tuple[str, str], str] = {}  # (class, lever) -> the kernel it was printed for
    for k in kernels:  # full names: console.out never wraps nor cuts a line
        shape = f" [{k['input_shapes']}]" if by_shape and k.get("input_shapes") else ""
        kind = k.get("kind") or {}
        console.out(f"{k['name']}{shape}: {k['bound_label']}"
                    + (f" [{kind['core']} / {kind['family']} / {kind['maker']}]" if kind else ""))
        bandwidths = _bandwidth_text(k["metrics"])
        if bandwidths:  # MemoryL0, Memory, MemoryUB, L2 bandwidths: in --json, and here too
            console.out(f"  bandwidth GB/s: {bandwidths}")
        for f in k["findings"]:
            for e in f["evidence"]:
                console.out(f"  evidence [{f['class']}]: {_evidence_line(e)}")
        for a in k.get("affinity") or []:
            console.out(f"  shape affinity: {a['input_shapes']}: {a['text']} ({a['threshold_name']}: {a['origin']})")
        for f in k["findings"]:
            for lever, origin in zip(f["levers"], f.get("lever_origins") or [""] * len(f["levers"]), strict=True):
                first = said.setdefault((f["class"], lever), k["name"])
                if first != k["name"]:  # one paragraph per lever (on cpu every kernel has no_counters'): a pointer
                    console.out(f"  lever [{f['class']}]: as for {first} above")
                    continue
                console.out(f"  lever [{f['class']}]: {lever}" + (f" ({origin})" if origin else ""))
    for f in report.get("findings", []):
        ev = "; ".join(f"{e['column']} {e['value']} {e['op']} {e['threshold']}" for e in f["evidence"])
        console.out(f"profile finding: {f['label']} ({ev}); " + "; ".join(f["levers"]))


def _evidence_line(e: dict[str, Any]) -> str:
    """One evidence line: the sentence, then where its threshold comes from."""
    text = e.get("text") or f"{e['column']} = {_fmt(e['value'])} {e['op']} {e['threshold']}"
    return f"{text} ({e['threshold_name']}: {e['origin']})" if e.get("origin") else text


def _render_profile_checks(report: dict[str, Any]) -> None:
    """The profile-wide lines: communication, AI CPU operators, dynamic shape, host gaps."""
    from ascendopt import console

    def us(value: float) -> str:  # a duration in the unit its magnitude picks
        return console.duration_text(value, digits=1)

    comm = report["communication"]
    if comm["count"]:
        cores = ", ".join(f"{c} {us(t)}" for c, t in comm.get("by_core", {}).items())
        top = ", ".join(k["name"] for k in comm.get("kernels", [])[:3])
        console.out(f"communication: {us(comm['total_us'])} in {console.plural(comm['count'], 'task')} ({cores}; "
                    f"e.g. {top}), "
                    "not in compute shares")
    cpu = report.get("ai_cpu")
    if cpu and cpu["count"]:
        long = ", ".join(f"{k['name']} {us(k['avg_us'])}" for k in cpu["long"][:5]) or "none"
        console.out(f"AI CPU operators: {console.plural(cpu['count'], 'launch')} of "
                    f"{console.plural(cpu['kernels'], 'kernel')}, "
                    f"{us(cpu['total_us'])} ({100 * cpu['share']:.1f} % of device kernel time); "
                    f">= {cpu['long_rule']['threshold']:g} us: "
                    f"{long}; lever: {cpu['lever']} ({cpu['lever_origin']})")
    dyn = report.get("dynamic_shape")
    if dyn and dyn["dynamic"]:
        console.out(f"dynamic shape: {dyn['dynamic']} of {console.plural(dyn['launches'], 'launch')} "
                    f"({dyn['vendor_dynamic']} vendor-op, {dyn['triton_dynamic']} Triton-style ones, dynamic by design)"
                    + (f"; lever: {dyn['lever']} ({dyn['lever_origin']})" if dyn["lever"] else ""))
    gaps = report.get("host_gaps")
    if gaps and gaps["span_us"]:
        console.out(f"host gaps: device idle {us(gaps['idle_us'])} between tasks "
                    f"({100 * gaps['idle_share']:.1f} % of the {us(gaps['span_us'])} span); "
                    f"{gaps['host_bound_runs']} run(s) of >= {gaps['rule']['fusion_min_kernels']} short kernels "
                    f"busy < {gaps['rule']['threshold']:g} of their wall time")
        for r in gaps["runs"]:
            console.out(f"  rows {r['first_row']}-{r['last_row']} ({console.plural(r['kernels'], 'kernel')}, busy "
                        f"{us(r['busy_us'])}, idle {us(r['idle_us'])}): {', '.join(_short(n, 40) for n in r['names'])}")
        if gaps["host_bound_runs"]:
            console.out(f"  lever: {gaps['lever']} ({gaps['lever_origin']})")


HISTOGRAM_WIDTH = 20  # characters of the bar of a kernel's heaviest shape in `analyze --shapes`


def render_shapes(report: dict[str, Any]) -> None:
    """Print an ``analyze.shapes.shape_report``: per kernel, its distinct input shapes heaviest first with
    launches, device time, share and a bar (the shape histogram), then its launch sizes where recorded."""
    from ascendopt import console

    for note in report["notes"]:
        console.status(note)
    console.out(f"profile: {report['profile']} ({report['source']}); sha256 {report['sha256'][:12]}; "
                f"{console.plural(report['kernel_count'], 'kernel')}")
    for k in report["kernels"]:
        console.out(f"{k['name']}: {console.plural(k['launches'], 'launch', 'launches')}, "
                    f"{console.duration_text(k['device_us'], digits=1)}, {k['distinct_shapes']} distinct input "
                    f"shape(s) recorded for {100 * k['shaped_share']:.1f} % of its time")
        if k["shapes"]:
            top = max(s["share"] for s in k["shapes"]) or 1.0
            rows = [[";".join(",".join(map(str, d)) for d in s["shapes"]), ";".join(s["dtypes"]) or "-",
                     str(s["launches"]), f"{s['device_us']:.2f}", f"{100 * s['share']:.1f}%",
                     "#" * max(1, round(HISTOGRAM_WIDTH * s["share"] / top))] for s in k["shapes"]]
            other = k["other"]
            if other["distinct_shapes"]:
                rows.append([f"({other['distinct_shapes']} more shapes)", "", str(other["launches"]),
                             f"{other['device_us']:.2f}", "", ""])
            console.table(["input shapes", "dtypes", "launches", "us", "share", "histogram"], rows, title=k["name"],
                          justify=["left", "left", "right", "right", "right", "left"])
        for config, n in list(k["launch_configs"].items())[:5]:
            console.out(f"  launch {config}: {console.plural(n, 'launch', 'launches')}")


def _print_compare(diff: dict[str, Any]) -> None:
    from ascendopt import console

    console.out(f"compare: before {diff['a']} -> after {diff['b']}")
    rows = []
    for k in diff["kernels"]:
        moved = ", ".join(f"{c} {m['a']:.3f}->{m['b']:.3f}" for c, m in k["metrics"].items()
                          if c.endswith("_ratio") and abs(m["delta"]) >= 0.005)
        ratio = k["avg_us_ratio"]
        rows.append([f"{k['a']['avg_us']:.2f}", f"{k['b']['avg_us']:.2f}",
                     f"{ratio:.3f}x" if ratio else "-", f"{k['bound_a']} -> {k['bound_b']}", moved or "-"])
    labels = [k["name"] + (f" [{_short(k['shape_key'], SHAPE_WIDTH)}]" if k.get("shape_key") is not None else "")
              for k in diff["kernels"]]  # --by shape: one row per kernel and shapes
    _table(["kernel", "before us", "after us", "after/before", "class", "metrics moved"], labels, rows,
           title="per-kernel diff")
    if diff["only_in_a"]:
        console.out(f"only before: {', '.join(diff['only_in_a'][:10])}")
    if diff["only_in_b"]:
        console.out(f"only after: {', '.join(diff['only_in_b'][:10])}")


def stamp_text(stamp: str | None) -> str:
    """A run's sort stamp (``YYYYMMDDhhmmss`` and up to 3 digits of milliseconds, the local time the profiler
    put in the folder's name) as an ISO local time, ``2026-12-04T19:58:36.123``; ``-`` when there is none,
    the digits as they are when they are not a date."""
    import datetime as dt

    if not stamp:
        return "-"
    try:
        when = dt.datetime.strptime(stamp[:14], "%Y%m%d%H%M%S")
    except ValueError:
        return stamp
    millis = stamp[14:17].rstrip("0")
    return when.isoformat() + (f".{stamp[14:17]}" if millis else "")


def _print_runs(path: str) -> None:
    from ascendopt import console
    from ascendopt.analyze.traces import list_runs

    runs = list_runs(path)
    console.table(["#", "run", "kind", "stamp"],
                  [(i, str(r.path), r.kind, stamp_text(r.stamp)) for i, r in enumerate(runs, 1)],
                  title=f"runs under {path} (newest last; analyze reads the newest)")


def analyze(
    paths: Annotated[list[str], typer.Argument(metavar="PATH",
        hidden=True, help="Profile folder(s): *_ascend_pt, ASCEND_PROFILER_OUTPUT, "
                                                    "PROF_*, OPPROF_*, an ascendopt cuda/cpu folder, a parent of "
                                                    "runs, or a CSV. Several paths = metric-group runs to merge.")],
    kernel_filter: Annotated[str | None, typer.Option("--kernel-filter", "-k", metavar="SUBSTRING",
                                                         help="Substring of a kernel name/op type; "
                                                              "'regex:EXPR' for a regex.")] = None,
    top: Annotated[int | None, typer.Option("--top", "-n", metavar="N",
        help="Show the N kernels with most time.")] = DEFAULT_TOP,
    compare: Annotated[str | None, typer.Option("--compare", metavar="PATH", help="Baseline profile: per-kernel diff "
                                                                     "(this PATH = after, OTHER = before).")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the runs under PATH and exit.")] = False,
    by: Annotated[str, typer.Option("--by", metavar="KEY",
        help="One entry per kernel 'name', or per kernel and input 'shape' "
                                                 "(where the profile records shapes).")] = "name",
    shapes: Annotated[bool, typer.Option("--shapes", help="Per kernel, the histogram of its input shapes "
                                                          "(what `freeze --shapes-from` buckets).")] = False,
    csv: CsvOpt = False,
    json: JsonOpt = False,
) -> None:
    """Step 3: rank kernels, classify bottlenecks, list levers.

    Rank kernels by duration share, classify each hot kernel's bottleneck with evidence, list levers.

    PATH: a profile folder (*_ascend_pt, ASCEND_PROFILER_OUTPUT, PROF_*, OPPROF_*, an ascendopt cuda/cpu
    folder), a parent of runs (the newest is read), or a CSV; several PATHs are metric-group runs of one
    workload, merged.
    """
    from ascendopt import console
    from ascendopt.analyze import diagnosis as analysis
    from ascendopt.analyze.traces import load_profile, load_profiles

    if csv:
        console.configure(csv=True)
    if list_:
        if json:
            from ascendopt.analyze.traces import list_runs

            console.print_json([{"path": str(r.path), "kind": r.kind, "stamp": r.stamp}
                                for p in paths for r in list_runs(p)])
            return
        for p in paths:
            _print_runs(p)
        return
    if shapes:
        from ascendopt.analyze.shapes import read_shapes, shape_report
        from ascendopt.errors import UsageError

        if len(paths) > 1 or compare:
            raise UsageError("--shapes reads one profile: give one PATH and no --compare")
        data = shape_report(read_shapes(paths[0], kernel_filter), top=top)
        if json:
            console.print_json(data)
        else:
            render_shapes(data)
        return
    # several PATHs: metric-group runs of one workload (merged) or one run per device (stacked)
    profile = load_profile(paths[0]) if len(paths) == 1 else load_profiles(paths)
    if compare:
        # the diff covers every kernel; the printed report keeps the --top hottest
        full = analysis.analyze(profile, kernel_filter=kernel_filter, top=None, by=by)
        base = analysis.analyze(load_profile(compare), kernel_filter=kernel_filter, top=None, by=by)
        diff = analysis.compare(base, full)
        report = dict(full, kernels=full["kernels"][:top] if top else full["kernels"])
        if json:
            console.print_json({"schema": 1, "report": report, "compare": diff})
            return
        render_report(report)
        _print_compare(diff)
        return
    report = analysis.analyze(profile, kernel_filter=kernel_filter, top=top, by=by)
    if json:
        console.print_json(report)
        return
    render_report(report)


EXAMPLES = examples(
    "ascendopt analyze npu_prof/              # the newest run under a parent",
    "ascendopt analyze npu_prof/ --list       # every run under it",
    "ascendopt analyze RUN -k my_kernel --top 10 --json",
    "ascendopt analyze AFTER --compare BEFORE",
    "ascendopt analyze RUN --by shape",
    "ascendopt analyze RUN --shapes -k my_kernel",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(analyze)
