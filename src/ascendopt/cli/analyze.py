"""`ascendopt analyze PATH`: hotspots, bottleneck class with evidence, levers; `--compare` diffs two profiles."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ascendopt.cli.options import JsonOpt

DEFAULT_TOP = 15  # kernels a printed report lists, hottest first (`--top`; `collect --analyze` uses it too)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) >= 1 else f"{value:.{digits}f}"
    return str(value)


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


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
    console.out(f"profile: {report['profile']} ({report['kind']})")
    def known(value, unit: str = "") -> str:
        return "unknown" if value is None else f"{value}{unit}"

    console.out(f"device: chip {known(dev.get('chip'))}, cube cores {known(dev.get('cube_cores'))}, vector cores "
                f"{known(dev.get('vector_cores'))}, clock {known(dev.get('clock_mhz'), ' MHz')}; "
                f"source: {dev.get('source')}")
    console.out(f"metric groups: {', '.join(report['metric_groups']) or 'none'}; not collected: "
                f"{', '.join(report['not_collected']) or 'none'}")
    totals = ", ".join(f"{d} {t:.1f} us" for d, t in report["total_us"].items())
    console.out(f"device kernel time: {totals} over {report['kernel_count']} kernels"
                + (f"; communication {report['communication']['total_us']:.1f} us (not in shares)"
                   if report["communication"]["count"] else ""))
    kernels = report["kernels"]
    console.table(
        ["kernel", "core", "count", "total us", "avg us", "share"],
        [(_short(k["name"]), k["core_type"], k["count"], f"{k['total_us']:.2f}", f"{k['avg_us']:.2f}",
          f"{100 * k['share']:.1f}%") for k in kernels],
        title="hotspots", justify=["left", "left", "right", "right", "right", "right"],
    )
    shown = [(h, c) for h, c in ANALYZE_TABLE_METRICS if any(k["metrics"].get(c) is not None for k in kernels)]
    console.table(["kernel", "class", *(h for h, _ in shown)],
                  [[_short(k["name"], 36), k["bound"], *(_fmt(k["metrics"].get(c)) for _, c in shown)]
                   for k in kernels],
                  title="bottlenecks" + ("" if shown else " (pipe counters not collected)"))
    for k in kernels:
        console.out(f"{_short(k['name'], 60)}: {k['bound_label']}")
        bandwidths = _bandwidth_text(k["metrics"])
        if bandwidths:  # MemoryL0, Memory, MemoryUB, L2 bandwidths: in --json, and here too
            console.out(f"  bandwidth GB/s: {bandwidths}")
        for f in k["findings"]:
            for e in f["evidence"]:
                console.out(f"  evidence [{f['class']}]: {e['column']} = {_fmt(e['value'])} {e['op']} "
                            f"{e['threshold']:g} ({e['threshold_name']}: {e['origin']})")
        for lever in k["levers"]:
            console.out(f"  lever: {lever}")
    for f in report.get("findings", []):
        ev = "; ".join(f"{e['column']} {e['value']} {e['op']} {e['threshold']}" for e in f["evidence"])
        console.out(f"profile finding: {f['label']} ({ev}); " + "; ".join(f["levers"]))


def _print_compare(diff: dict[str, Any]) -> None:
    from ascendopt import console

    console.out(f"compare: before {diff['a']} -> after {diff['b']}")
    rows = []
    for k in diff["kernels"]:
        moved = ", ".join(f"{c} {m['a']:.3f}->{m['b']:.3f}" for c, m in k["metrics"].items()
                          if c.endswith("_ratio") and abs(m["delta"]) >= 0.005)
        ratio = k["avg_us_ratio"]
        rows.append((_short(k["name"], 40), f"{k['a']['avg_us']:.2f}", f"{k['b']['avg_us']:.2f}",
                     f"{ratio:.3f}x" if ratio else "-", f"{k['bound_a']} -> {k['bound_b']}", moved or "-"))
    console.table(["kernel", "before us", "after us", "after/before", "class", "metrics moved"], rows,
                  title="per-kernel diff")
    if diff["only_in_a"]:
        console.out(f"only before: {', '.join(_short(n) for n in diff['only_in_a'][:10])}")
    if diff["only_in_b"]:
        console.out(f"only after: {', '.join(_short(n) for n in diff['only_in_b'][:10])}")


def _print_runs(path: str) -> None:
    from ascendopt import console
    from ascendopt.analyze.traces import list_runs

    runs = list_runs(path)
    console.table(["#", "run", "kind", "stamp"],
                  [(i, str(r.path), r.kind, r.stamp or "-") for i, r in enumerate(runs, 1)],
                  title=f"runs under {path} (newest last; analyze reads the newest)")


def analyze(
    paths: Annotated[list[str], typer.Argument(help="Profile folder(s): *_ascend_pt, ASCEND_PROFILER_OUTPUT, "
                                                    "PROF_*, OPPROF_*, an ascendopt cuda/cpu folder, a parent of "
                                                    "runs, or a CSV. Several paths = metric-group runs to merge.")],
    kernel_filter: Annotated[str | None, typer.Option("--kernel-filter", "-k",
                                                         help="Substring of a kernel name/op type; "
                                                              "'regex:EXPR' for a regex.")] = None,
    top: Annotated[int | None, typer.Option("--top", "-n", help="Show the N kernels with most time.")] = DEFAULT_TOP,
    compare: Annotated[str | None, typer.Option("--compare", help="Baseline profile: per-kernel diff "
                                                                     "(this PATH = after, OTHER = before).")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the runs under PATH and exit.")] = False,
    json: JsonOpt = False,
) -> None:
    """Rank kernels by duration share, classify each hot kernel's bottleneck with evidence, list levers."""
    from ascendopt import console
    from ascendopt.analyze import diagnosis as analysis
    from ascendopt.analyze.traces import load_profile, load_profiles

    if list_:
        if json:
            from ascendopt.analyze.traces import list_runs

            console.print_json([{"path": str(r.path), "kind": r.kind, "stamp": r.stamp}
                                for p in paths for r in list_runs(p)])
            return
        for p in paths:
            _print_runs(p)
        return
    # several PATHs: metric-group runs of one workload (merged) or one run per device (stacked)
    profile = load_profile(paths[0]) if len(paths) == 1 else load_profiles(paths)
    if compare:
        # the diff covers every kernel; the printed report keeps the --top hottest
        full = analysis.analyze(profile, kernel_filter=kernel_filter, top=None)
        base = analysis.analyze(load_profile(compare), kernel_filter=kernel_filter, top=None)
        diff = analysis.compare(base, full)
        report = dict(full, kernels=full["kernels"][:top] if top else full["kernels"])
        if json:
            console.print_json({"schema": 1, "report": report, "compare": diff})
            return
        render_report(report)
        _print_compare(diff)
        return
    report = analysis.analyze(profile, kernel_filter=kernel_filter, top=top)
    if json:
        console.print_json(report)
        return
    render_report(report)


def register(app: typer.Typer, name: str) -> None:
    app.command(name)(analyze)
