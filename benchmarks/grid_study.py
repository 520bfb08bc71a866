"""How do the CUDA grid policy and the row tile move the memory-bound forward passes? (issue 7)

For each case (kernel, preset) the forward pass at its default tunables is timed (``bench.measure``:
device time, the device held busy while the host enqueues) under every combination of

* ``ASCENDOPT_CUDA_PROGRAMS_PER_SM`` (programs per SM of the 1D core grid; a huge value = one
  program per task, the hardware scheduler's grid instead of a persistent one),
* ``ASCENDOPT_CUDA_RESIDENT_GRID`` (1 = cap the grid at the programs resident at once, 0 = not),
* the kernel's row-tile tunable where it has one (``block_rows``),

next to a device-to-device copy of the same bytes (the achievable bandwidth at this size) and a
copy of 1 GiB. Prints a markdown table of us per call and the fraction of each copy bandwidth.

    python3 benchmarks/grid_study.py --out grid.json [--cases rms_norm:realistic,l2norm:widest]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("ASCENDOPT_BACKEND", "cuda")

DEFAULT_CASES = ("rms_norm:realistic,rms_norm:widest,l2norm:realistic,l2norm:widest,"
                 "chunk_local_cumsum:realistic_vector,causal_conv1d:realistic")
PROGRAMS_PER_SM = ("4", "8", "16", "32", "100000")
RESIDENT = ("1", "0")
ROW_TILES = (0, 1, 2, 4)


def copy_ms(nbytes: int, backend) -> float:
    """Median device time of copying ``nbytes / 2`` bytes (``nbytes`` read + written), ms."""
    from kernels import copy_bandwidth_gbs  # benchmarks/kernels.py, next to this script

    return copy_bandwidth_gbs(backend, max(4, nbytes // 2))["median_ms"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()

    from ascendopt import backends, bench
    from ascendopt.kernels import get, resident

    backend = backends.current()
    device = backend.torch_device()
    big_copy = copy_ms(2 << 30, backend)
    big_gbs = 2 * (1 << 30) / (big_copy * 1e-3) / 1e9
    rows = []
    started = time.perf_counter()
    for case in args.cases.split(","):
        name, preset = case.split(":")
        spec = get(name)
        dims = spec.shape(preset).dims
        dtype = spec.dtypes[0]
        cost = spec.cost(dims, dtype, "fwd")
        same_copy = copy_ms(cost.bytes, backend)
        sets = [(spec.make_inputs(dict(dims), dtype, device, seed),) for seed in range(4)]
        tiles = ROW_TILES if "block_rows" in spec.tunables else (None,)
        for pps, res, tile in itertools.product(PROGRAMS_PER_SM, RESIDENT, tiles):
            os.environ["ASCENDOPT_CUDA_PROGRAMS_PER_SM"] = pps
            os.environ["ASCENDOPT_CUDA_RESIDENT_GRID"] = res
            resident.forget()  # re-learn residency under the new policy
            cfg = spec.config({} if tile is None else {"block_rows": tile})
            try:
                t = bench.measure(lambda inp, cfg=cfg, spec=spec: spec.run(inp, cfg, "fwd"), inputs=sets,
                                  backend=backend, repeats=args.repeats)
                ms, err = t.median_ms, None
            except Exception as exc:  # noqa: BLE001 - one failing combination is a data point
                ms, err = None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"
            row = {"kernel": name, "preset": preset, "pps": pps, "resident": res, "block_rows": tile,
                   "us": ms and ms * 1e3, "same_size_copy_us": same_copy * 1e3,
                   "of_same_size_copy": ms and same_copy / ms, "of_1gib_copy": ms and cost.bytes / (ms * 1e-3) / 1e9
                   / big_gbs, "error": err}
            rows.append(row)
            print(f"{name} {preset} pps={pps} res={res} br={tile}: {row['us'] and round(row['us'], 1)} us "
                  f"({row['of_same_size_copy'] and round(100 * row['of_same_size_copy'])} % of same-size copy)",
                  file=sys.stderr, flush=True)
    for key in ("ASCENDOPT_CUDA_PROGRAMS_PER_SM", "ASCENDOPT_CUDA_RESIDENT_GRID"):
        os.environ.pop(key, None)
    Path(args.out).write_text(json.dumps({"copy_1gib_gbs": big_gbs, "rows": rows, "command": " ".join(sys.argv),
                                          "seconds": time.perf_counter() - started}, indent=2))
    print(f"copy 1 GiB: {big_gbs:.0f} GB/s\n\n| kernel | preset | programs/SM | resident cap | block_rows | us "
          "| % same-size copy | % 1 GiB copy |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        us = "" if r["us"] is None else f"{r['us']:.1f}"
        f1 = "" if r["us"] is None else f"{100 * r['of_same_size_copy']:.0f}"
        f2 = "" if r["us"] is None else f"{100 * r['of_1gib_copy']:.0f}"
        print(f"| {r['kernel']} | {r['preset']} | {r['pps']} | {r['resident']} | {r['block_rows']} | {us} | {f1} "
              f"| {f2} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
