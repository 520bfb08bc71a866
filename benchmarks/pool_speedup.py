"""How much faster does ``optimize-round --auto`` screen on a pool of devices, and what does the pool cost?

For one bundled kernel at one shape preset, in a fresh temporary workspace per run (nothing cached):

1. ``freeze`` of the kernel (forward, its default configuration) in this process;
2. the screening alone (``--confirm 0``, the whole space: ``--budget-s`` large) timed around the call
   (``rounds.auto.run_auto``), once per mode: ``plain`` (today's one-device screening, the search in this process),
   then ``--devices N`` for each N of ``--devices`` (the local pool: ``tune.pooled``, each candidate interleaved with
   the start on one device, every device anchored before and after its work);
3. ``--repeat`` runs of each mode, in turn (plain, 1, 2, plain, 1, 2, ...), so a slow stretch of the host hits every
   mode alike; the table gives each mode's median wall time.

The speedup of N devices is ``wall(--devices 1) / wall(--devices N)``; the pool's overhead is ``wall(--devices 1) /
wall(plain) - 1`` (the anchors, the device process, and timing each candidate interleaved with the start: twice the
timed calls of the plain screening). The finalists (the two fastest screened) must agree between modes.

    python benchmarks/pool_speedup.py --backend cpu --kernel rms_norm --preset tiny --devices 1,2 --repeat 3
    python benchmarks/pool_speedup.py --backend cpu --devices 1,2 --repeat 1 --out $OUT/pool.json   # quick
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _say(text: str) -> None:
    print(f"  {text}", file=sys.stderr, flush=True)


def one_run(kernel: str, preset: str, devices: int | None, args) -> dict:
    """One screening of ``kernel`` at ``preset``: ``devices`` None is the plain screening, else a local pool."""
    from ascendopt.freeze.task import freeze_kernel
    from ascendopt.pool.options import PoolOptions
    from ascendopt.rounds import auto as round_auto
    from ascendopt.tune import search as tune
    from ascendopt.workspace import Workspace

    with tempfile.TemporaryDirectory(prefix=f"pool_speedup_{kernel}_") as tmp:
        ws = Workspace(Path(tmp) / ".ascendopt")
        freeze_kernel(ws, kernel=kernel, shapes=[preset], dtype=args.dtype, mode="fwd", profile=False,
                      precheck=False, max_rounds=50)
        pool = PoolOptions(devices=str(devices)) if devices else None
        t0 = time.monotonic()
        result = round_auto.run_auto(ws, hypothesis="pool_speedup benchmark", budget_s=args.budget_s, confirm=0,
                                     force=True, precheck=False, pool=pool)
        wall = time.monotonic() - t0
    screening = result["screening"]
    ranked = sorted((r for r in screening["rows"] if r["ms"] is not None), key=lambda r: r["ms"])
    return {"mode": f"--devices {devices}" if devices else "plain", "wall_s": round(wall, 2),
            "screen_s": screening["seconds"], "covered": screening["covered"], "space": screening["total"],
            "fastest": [tune.config_key(r["config"]) for r in ranked[:2]],
            "quarantined": (result.get("pool") or {}).get("quarantined", {}),
            "measured": {d: len(k) for d, k in ((result.get("pool") or {}).get("measured") or {}).items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None, help="cpu | cuda | npu (default: detected)")
    parser.add_argument("--kernel", default="rms_norm")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--devices", default="1,2", help="pool sizes to time, besides the plain screening")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=3600.0, help="screening's deadline (large: all of it)")
    parser.add_argument("--out", default=None, help="write the runs and the table as JSON here")
    args = parser.parse_args(argv)
    from ascendopt.device import backends

    if args.backend:
        backends.select(args.backend)
    sizes = [int(n) for n in args.devices.split(",")]
    runs = []
    for k in range(args.repeat):
        for devices in [None, *sizes]:
            _say(f"run {k + 1}/{args.repeat}: {'plain' if devices is None else f'--devices {devices}'}")
            runs.append(one_run(args.kernel, args.preset, devices, args))
            _say(json.dumps(runs[-1]))
    modes = ["plain", *[f"--devices {n}" for n in sizes]]
    wall = {m: statistics.median(r["wall_s"] for r in runs if r["mode"] == m) for m in modes}
    one = wall.get("--devices 1")
    table = [{"mode": m, "median_wall_s": round(wall[m], 2),
              "speedup_vs_1": round(one / wall[m], 2) if one and m != "plain" else None,
              "vs_plain": round(wall[m] / wall["plain"], 2)} for m in modes]
    same = len({tuple(r["fastest"]) for r in runs}) == 1
    print("| mode | median wall s | speedup vs --devices 1 | wall / plain |")
    print("|---|---|---|---|")
    for row in table:
        print(f"| {row['mode']} | {row['median_wall_s']} | {row['speedup_vs_1'] or '-'} | {row['vs_plain']} |")
    print(f"same two fastest in every run: {same} ({runs[0]['fastest']}); space {runs[0]['space']}, "
          f"covered {sorted({r['covered'] for r in runs})}")
    if args.out:
        Path(args.out).write_text(json.dumps({"runs": runs, "table": table, "same_fastest": same}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
