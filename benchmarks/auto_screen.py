"""Does `optimize-round --auto` find a configuration within 3 % of the exhaustive best, in <= 5 min wall?

For each kernel (default l2norm, rms_norm, causal_conv1d) at one shape preset (default ``realistic``;
``tiny`` for a CPU smoke run), in a fresh temporary workspace:

1. ``ascendopt freeze`` of the kernel (forward, bf16, its default configuration) in this process;
2. ``--auto`` as the CLI runs it (``rounds.auto.run_auto``: screening within ``--budget-s``, then the
   ``--confirm`` fastest as gated rounds), its wall time measured around the whole call;
3. in the same process, the same screening (``tune.screen.screen_config``: smoke check + short
   ``bench.measure`` on the gate's L2-rotated inputs) over every configuration of the same space
   (``rounds.auto.plan_space``), fresh (no cache), in a seeded random order; a space larger than
   ``--max-exhaustive`` or one that outlasts ``--exhaustive-s`` is covered in part, and the table says so;
4. when the two winners differ, they are timed again interleaved (``bench.compare``), so the gap is
   not one short sample's.

The gap is the exhaustive pass's time of --auto's best over the exhaustive best, both measured by the
exhaustive pass (one footing), minus 1; ``recheck`` is the interleaved ratio of step 4.

    python benchmarks/auto_screen.py --out $OUT/auto_screen.json                       # H200, all three
    python benchmarks/auto_screen.py --kernels l2norm --out $OUT/auto_screen_l2norm.json  # one kernel
    python benchmarks/auto_screen.py --table a.json b.json                             # merge the tables
    python benchmarks/auto_screen.py --backend cpu --preset tiny --budget-s 5 --max-exhaustive 3  # CPU smoke
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

KERNELS = ("l2norm", "rms_norm", "causal_conv1d")
COLUMNS = ("kernel", "preset", "auto wall s", "screened", "auto best", "auto ms", "exhaustive best",
           "exhaustive ms", "exhaustive covered", "gap", "recheck", "within 3 %")


def _say(text: str) -> None:
    print(f"  {text}", file=sys.stderr, flush=True)


def ctx_start(ws) -> dict:
    """The frozen (default) configuration of the workspace's contract."""
    from ascendopt.rounds.context import RoundContext

    return RoundContext.load(ws).baseline_config


def changes(key: str, default: str) -> str:
    """A configuration key as its changes from the default (``default`` for none): the tables stay narrow."""
    base = dict(kv.split("=") for kv in default.split(",")) if default else {}
    diff = [kv for kv in key.split(",") if base.get(kv.split("=")[0]) != kv.split("=")[1]]
    return ",".join(diff) or "default"


def run_case(kernel: str, preset: str, args, deadline: float) -> dict:
    """One kernel at one preset: freeze, --auto, the exhaustive screening, the re-check."""
    from ascendopt.device import backends
    from ascendopt.errors import AscendoptError
    from ascendopt.freeze.task import freeze_kernel
    from ascendopt.gate.stages import timing_inputs
    from ascendopt.judge import bench
    from ascendopt.rounds import auto as round_auto
    from ascendopt.rounds.context import RoundContext
    from ascendopt.tune import screen as tune_screen
    from ascendopt.tune import search as tune
    from ascendopt.workspace import Workspace

    backend = backends.current()
    row: dict = {"kernel": kernel, "preset": preset, "backend": backend.name}
    with tempfile.TemporaryDirectory(prefix=f"auto_screen_{kernel}_") as tmp:
        ws = Workspace(Path(tmp) / ".ascendopt")
        freeze_kernel(ws, kernel=kernel, shapes=[preset], dtype=args.dtype, mode="fwd", profile=False,
                      max_rounds=50)
        overflow = False
        t0 = time.monotonic()
        try:
            result = round_auto.run_auto(ws, hypothesis="auto_screen benchmark", budget_s=args.budget_s,
                                         confirm=args.confirm, pairs=args.pairs, force=True, step=_say)
        except AscendoptError as exc:
            if "outside the UB-feasible space" not in exc.message or backend.info().ub_enforced:
                raise
            # off-NPU the auto tiles resolve for this backend and may exceed the model chip's UB
            overflow = True
            t0 = time.monotonic()
            result = round_auto.run_auto(ws, hypothesis="auto_screen benchmark", budget_s=args.budget_s,
                                         confirm=args.confirm, pairs=args.pairs, force=True, allow_ub_overflow=True,
                                         step=_say)
        row["auto_wall_s"] = round(time.monotonic() - t0, 1)
        screening = result["screening"]
        row.update(screened=screening["covered"], space=screening["total"], stopped=screening["stopped"],
                   auto_best=tune.config_key(result["best"]), confirmed=result["confirmed"],
                   ub_overflow_allowed=overflow, default=tune.config_key(ctx_start(ws)),
                   screen_s=screening["seconds"])
        auto_rows = {tune.config_key(r["config"]): r for r in screening["rows"]}
        row["auto_ms"] = (auto_rows.get(row["auto_best"]) or {}).get("ms")

        ctx = RoundContext.load(ws)
        plan = round_auto.plan_space(ctx, backend.info(), overflow)
        spec, w = ctx.spec, ctx.contract.workload
        inputs = timing_inputs(spec, plan.case.dims, w.dtype, w.mode, backend.torch_device())
        todo = [dict(c) for c in plan.space]
        random.Random(f"{args.seed}|{kernel}|{preset}").shuffle(todo)
        # --auto's best is always measured: the gap needs its time on the exhaustive pass's footing
        todo.sort(key=lambda c: tune.config_key(c) != row["auto_best"])
        todo = todo[:args.max_exhaustive]
        stop_at = time.monotonic() + min(args.exhaustive_s, max(10.0, deadline - time.monotonic() - 20))
        t1 = time.monotonic()
        measured = {}
        for cfg in todo:
            if time.monotonic() > stop_at:
                break
            s = tune_screen.screen_config(spec, plan.case.dims, w.dtype, w.mode, cfg, inputs, backend,
                                          tolerances=ctx.contract.tolerances or None)
            measured[tune.config_key(cfg)] = s.ms
        row["exhaustive_s"] = round(time.monotonic() - t1, 1)
        ok = {k: v for k, v in measured.items() if v is not None}
        row["exhaustive_covered"] = len(measured)
        if not ok or measured.get(row["auto_best"]) is None:
            row["skipped"] = "the exhaustive pass measured no passing configuration" if not ok else \
                "--auto's best failed in the exhaustive pass"
            return row
        best_key = min(ok, key=ok.get)
        row.update(exhaustive_best=best_key, exhaustive_ms=ok[best_key], auto_exhaustive_ms=measured[row["auto_best"]],
                   gap=measured[row["auto_best"]] / ok[best_key] - 1.0)
        if best_key != row["auto_best"]:
            cfg_auto = dict(result["best"])
            cfg_exh = next(c for c in todo if tune.config_key(c) == best_key)
            c = bench.compare(lambda inp: spec.run(inp, cfg_exh, w.mode), lambda inp: spec.run(inp, cfg_auto, w.mode),
                              inputs=inputs, backend=backend, pairs=args.pairs)
            row["recheck"] = {"ratio": c.ratio, "verdict": c.verdict}  # auto's best / exhaustive best
    return row


def within_3pct(r: dict) -> bool | None:
    if "gap" not in r:
        return None
    if r["gap"] <= 0.03:
        return True
    recheck = r.get("recheck") or {}
    return recheck.get("ratio") is not None and (recheck["ratio"] <= 1.03 or recheck.get("verdict") in
                                                 ("same", "faster"))


def markdown(rows: list[dict]) -> str:
    def ms(v):
        return "-" if v is None else f"{v:.4f}"

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        if "gap" not in r:
            lines.append(f"| {r['kernel']} | {r['preset']} | {r.get('auto_wall_s', '-')} | "
                         f"{r.get('screened', '-')} / {r.get('space', '-')} | skipped: {r.get('skipped')} |"
                         + " |" * (len(COLUMNS) - 5))
            continue
        recheck = r.get("recheck")
        default = r.get("default", "")
        cells = [r["kernel"], r["preset"], f"{r['auto_wall_s']:.1f}",
                 f"{r['screened']} / {r['space']} ({r['stopped']})", changes(r["auto_best"], default),
                 ms(r["auto_ms"]), changes(r["exhaustive_best"], default), ms(r["exhaustive_ms"]),
                 f"{r['exhaustive_covered']} / {r['space']}",
                 f"{r['gap']:+.1%}", f"{recheck['ratio']:.3f} ({recheck['verdict']})" if recheck else "-",
                 "yes" if within_3pct(r) else "**NO**"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def summary_line(rows: list[dict]) -> str:
    judged = [r for r in rows if "gap" in r]
    within = sum(bool(within_3pct(r)) for r in judged)
    in_time = sum(r["auto_wall_s"] <= 300 for r in judged)
    return (f"{within} of {len(judged)} cases within 3 % of the exhaustive best; --auto within 5 min wall in "
            f"{in_time} of {len(judged)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated kernel names")
    ap.add_argument("--preset", default="realistic", help="shape preset of every kernel (tiny on CPU)")
    ap.add_argument("--backend", default=None, help="cpu | cuda | npu (default: detected)")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--budget-s", type=float, default=60.0, help="--auto's screening budget (s)")
    ap.add_argument("--confirm", type=int, default=2, help="--auto's confirmed candidates")
    ap.add_argument("--pairs", type=int, default=20, help="interleaved pairs (confirmation rounds, re-check)")
    ap.add_argument("--max-exhaustive", type=int, default=10_000, help="most configurations the exhaustive pass "
                                                                       "screens (a seeded random sample beyond)")
    ap.add_argument("--exhaustive-s", type=float, default=90.0, help="the exhaustive pass's time limit per case (s)")
    ap.add_argument("--deadline-s", type=float, default=560.0,
                    help="the whole run's wall limit (s): a case that cannot fit is skipped, the exhaustive pass "
                         "is cut short (one device call is limited to 10 min)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    ap.add_argument("--table", type=Path, nargs="+", default=None, help="print the table of these JSON files")
    args = ap.parse_args(argv)
    if args.table:
        try:
            rows = [r for path in args.table for r in json.loads(path.read_text())["rows"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(markdown(rows))
        print()
        print(summary_line(rows))
        return 0
    if args.backend:
        os.environ["ASCENDOPT_BACKEND"] = args.backend
    from ascendopt.device import backends
    from ascendopt.errors import AscendoptError, DeviceFault

    backends.current().prepare_kernels()  # cpu: TRITON_INTERPRET=1 before any kernel module is imported
    rows = []
    started = time.monotonic()
    deadline = started + args.deadline_s
    for kernel in [k for k in args.kernels.split(",") if k]:
        left = deadline - time.monotonic()
        if left < args.budget_s + 60:
            rows.append({"kernel": kernel, "preset": args.preset,
                         "skipped": f"--deadline-s: {left:.0f} s left, --auto alone needs --budget-s + confirmation"})
            continue
        print(f"{kernel} {args.preset}: freeze, --auto (budget {args.budget_s:g} s), exhaustive screening",
              file=sys.stderr, flush=True)
        try:
            row = run_case(kernel, args.preset, args, deadline)
        except AscendoptError as exc:  # one line in the table, not a traceback; later cases still run
            row = {"kernel": kernel, "preset": args.preset, "skipped": f"{type(exc).__name__}: {exc}"}
            if isinstance(exc, DeviceFault):  # the device context is gone: nothing more can run here
                rows.append(row)
                break
        rows.append(row)
        if args.out:  # after each case: a later failure keeps what was measured
            args.out.write_text(json.dumps({"rows": rows, "args": {k: str(v) for k, v in vars(args).items()}},
                                           indent=1, default=str))
    print(markdown(rows))
    print()
    print(summary_line(rows) + f"; {time.monotonic() - started:.0f} s in all on {backends.current().name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
