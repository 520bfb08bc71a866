"""`ascendopt demo`: the whole loop on a bundled kernel, in a temporary (or given) workspace.

freeze -> collect -> analyze -> optimize-round (one tunable change) -> gate -> reprofile -> report,
on the best backend present. On the CPU interpreter it uses the kernel's ``tiny`` preset in fp32,
forward only, and fewer timing pairs, so it ends in a few minutes on a small machine; on a device
it uses the ``realistic`` preset with the kernel's default dtype and mode.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ascendopt.cli.options import JsonOpt

STEPS = ("freeze", "collect", "analyze", "optimize-round", "gate", "reprofile", "report")


def choose_change(spec, dims, dtype: str, mode: str, ub_bytes: int, bound: str | None, current: dict[str, int]
                  ) -> tuple[dict[str, int], str]:
    """One tunable change the bottleneck class suggests: the first tile tunable moved one feasible step.

    Feasibility uses the UB model even off-npu (so the demo never proposes a tile that would not
    compile on Ascend); a value that resolves to the current tiles is skipped. Returns
    ``({name: value}, hypothesis)``.
    """
    from ascendopt.tune import search as tune
    from ascendopt.tune import space as tune_space

    feasible, _ = tune_space.enumerate_space(spec, dims, dtype, ub_bytes, enforce_ub=True, mode=mode, around=current)
    # only configurations that launch different tiles: block_rows=2 where auto resolves to 2 is no change
    distinct, alias = tune_space.dedupe(feasible, spec, dims, dtype, mode, keep=current)
    same = alias.get(tune.config_key(current))
    allowed = {tune.config_key(c.config) for c in distinct} - {same}
    axes = tune_space.axes(spec)
    direction = tune_space.preferred_direction(bound)
    for name in tune_space.order_tunables(spec, dims, dtype, bound):
        vals = axes[name]
        i = vals.index(current[name])
        for d in (direction, -direction):
            j = i + d
            while 0 <= j < len(vals):
                cfg = {**current, name: vals[j]}
                if tune.config_key(cfg) in allowed:
                    auto = " (from the UB model's automatic choice)" if current[name] == 0 else ""
                    why = (f"{bound or 'unclassified'}: try {name}={vals[j]}{auto}, the next UB-safe "
                           f"{'larger' if (vals[j] > current[name] and current[name] != 0) else 'explicit'} tile")
                    return {name: vals[j]}, why
                j += d
    raise RuntimeError(f"kernel {spec.name}: no UB-safe tunable change found")


def _analysis_table(report: dict[str, Any]) -> None:
    from ascendopt import console

    rows = [(k.get("name"), f"{(k.get('share') or 0):.1%}", f"{(k.get('avg_us') or 0):.2f}", k.get("bound") or "-")
            for k in (report or {}).get("kernels", [])[:5]]
    console.table(["kernel", "share", "avg us", "bound"], rows, title="analyze: hot kernels")


def demo(
    kernel: Annotated[str, typer.Option("--kernel", help="Bundled kernel to run the loop on.")] = "rms_norm",
    shape: Annotated[
        str | None, typer.Option("--shape", help="Shape preset (default: tiny on cpu, realistic on a device).")
    ] = None,
    workspace: Annotated[
        str | None, typer.Option("--workspace", "-w", help="Workspace folder (default: a new temporary folder).")
    ] = None,
    pairs: Annotated[
        int | None, typer.Option("--pairs", help="Interleaved timing pairs (default 16 on cpu, 30 on a device).")
    ] = None,
    json: JsonOpt = False,
) -> None:
    """Run the whole loop on a bundled kernel and print the round summary and where the files are."""
    import shutil
    import tempfile
    from pathlib import Path

    from ascendopt.rounds import run as round_run

    round_run.prepare_backend()  # before anything imports the kernel registry
    from ascendopt import console, kernels
    from ascendopt.collect import collect_kernel
    from ascendopt.contract.freeze import freeze_kernel
    from ascendopt.device import backends
    from ascendopt.errors import UsageError
    from ascendopt.gate.stages import run_gate
    from ascendopt.rounds import profiles as round_profiles
    from ascendopt.rounds import reprofile as rp
    from ascendopt.rounds import summary as round_summary
    from ascendopt.rounds import timing as round_timing
    from ascendopt.workspace import Workspace

    backend = backends.current()
    info = backend.info()
    on_cpu = backend.name == "cpu"
    spec = kernels.get(kernel)
    preset = shape or ("tiny" if on_cpu else "realistic")
    spec.shape(preset)
    dtype = "fp32" if on_cpu and "fp32" in spec.dtypes else None
    mode = "fwd" if on_cpu and "fwd" in spec.modes else None
    # 16 pairs on cpu: above round_timing.min_pairs() (12) with margin, and cheap on the interpreter
    pairs = pairs or (16 if on_cpu else 30)
    if pairs < round_timing.min_pairs():
        raise UsageError(f"--pairs {pairs}: at least {round_timing.min_pairs()} pairs, or the signed-rank test "
                         "can never call a change significant")
    root = Path(workspace) if workspace else Path(tempfile.mkdtemp(prefix="ascendopt-demo-"))
    ws = Workspace(root.resolve())
    console.info(f"demo: {kernel} [{preset}] on {backend.name} ({info.name}); workspace {ws.root}")
    out: dict[str, Any] = {"workspace": str(ws.root), "backend": backend.name, "kernel": kernel, "shape": preset}
    with console.progress("demo", total=len(STEPS)) as bar:
        bar.update("demo 1/7 freeze: contract, oracle check, kernel hit, baseline latency")
        groups = None  # the contract's default (PipeUtilization)
        if backend.name == "cuda" and shutil.which("ncu") is None:
            console.warn("ncu (Nsight Compute) is not on PATH: the demo collects durations only (metric group none)")
            groups = ["none"]
        contract = freeze_kernel(ws, kernel=kernel, shapes=[preset], dtype=dtype, mode=mode, metric_groups=groups)
        w = contract.workload
        out["baseline_ms"] = contract.baseline[0].median_ms
        bar.advance()

        bar.update(f"demo 2/7 collect: {', '.join(contract.metric_groups)}")
        profiles = [str(p) for p in collect_kernel(kernel, shape=round_profiles.dims_text(w.shapes[0].dims),
                                                   dtype=w.dtype, mode=w.mode, config=dict(w.config),
                                                   metric_groups=list(contract.metric_groups),
                                                   out_dir=ws.profiles_dir, name="baseline")]
        out["profiles"] = profiles
        bar.advance()

        bar.update("demo 3/7 analyze: rank kernels, classify the bottleneck")
        analysis = round_profiles.analyze_paths(profiles)
        hot = round_summary.target_kernel(analysis, list(contract.expected_kernels)) or {}
        bar.advance()
        if not json:
            _analysis_table(analysis)

        bar.update("demo 4/7 optimize-round: one tunable change, gate, interleaved bench, re-profile")
        change, hypothesis = choose_change(spec, w.shapes[0].dims, w.dtype, w.mode, info.ub_bytes, hot.get("bound"),
                                           spec.config(w.config))
        outcome = round_run.run_round(ws, hypothesis=hypothesis, sets=change, pairs=pairs, step=bar.update,
                                      before_profiles=profiles)
        record = outcome.record
        out["round"] = {"number": record.number, "change": change, "verdict": record.verdict,
                        "path": str(outcome.path)}
        bar.advance()

        bar.update("demo 5/7 gate: integrity, correctness, kernel hit, performance of the best so far")
        best = record.config if record.verdict == "keep" else None
        gate = run_gate(ws, config_override=best, pairs=pairs)
        out["gate"] = {"passed": gate.passed, "exit_code": gate.exit_code,
                       "failed_stage": gate.failed_stage.name if gate.failed_stage else None,
                       "why": gate.failed_stage.summary if gate.failed_stage else None}
        bar.advance()

        bar.update("demo 6/7 reprofile: collect again, diff, reclassify")
        with ws.lock():
            again = rp.reprofile(ws, step=bar.update)
        out["reprofile"] = {"profiles": again["profiles"], "stop": again["stop"]}
        bar.advance()

        bar.update("demo 7/7 report: markdown and plot")
        md, png = _write_report(ws)
        out["report"] = {"markdown": str(md), "plot": str(png)}
        bar.advance()

    if json:
        console.print_json(out)
    else:
        console.out(f"round {record.number} hypothesis: {hypothesis}")
        round_summary.render(record.summary, f"round {record.number} ({record.direction})")
        console.out(f"gate: {'GREEN' if gate.passed else 'RED at ' + gate.failed_stage.name}: "
                    + "; ".join(f"{s.name} {s.status}" for s in gate.stages))
        console.out(f"stop criteria: {again['stop']['reason']}")
        console.out("")
        console.out(f"files under {ws.root}:")
        for label, path in (("contract", ws.contract_path), ("round record", outcome.path),
                            ("profiles", ws.profiles_dir), ("report", md), ("plot", png)):
            console.out(f"  {label:<13} {path}")
        console.out(f"next: ascendopt optimize-round -w {ws.root} --hypothesis '...' --set NAME=VALUE "
                    f"(or --auto), then ascendopt report -w {ws.root}")
    if not gate.passed and gate.exit_code in (1, 3):
        raise typer.Exit(gate.exit_code)


def _write_report(ws):
    from ascendopt.contract import model as contract_mod
    from ascendopt.rounds import records as rounds
    from ascendopt.rounds import report as rep
    from ascendopt.rounds import run as round_run
    from ascendopt.workspace import atomic_write_text

    contract = contract_mod.load(ws)
    records = rounds.load_rounds(ws)
    md, png = ws.root / "report.md", ws.root / "rounds.png"
    rep.plot_rounds(contract.to_dict(), records, png)
    atomic_write_text(md, rep.render_markdown(contract.to_dict(), records, plot_name=png.name,
                                              max_rounds=round_run.max_rounds(contract)))
    return md, png


def register(app: typer.Typer, name: str) -> None:
    app.command(name)(demo)
