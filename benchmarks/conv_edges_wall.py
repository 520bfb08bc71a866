"""Where causal_conv1d's forward loses wall time to its edge launch: the call against its bulk launch alone.

``benchmarks/stage_breakdown.py`` sums kernel busy time, so it cannot tell what a side-stream edge launch
costs the call's wall time. This script times, interleaved (``ascendopt.bench.interleaved_samples``, device
events around batches of back-to-back calls, as ``benchmarks/kernels.py``), a configuration's forward in
four ways:

- ``full``: the call as the library runs it;
- ``prio``: as ``full`` with the side stream at the device's highest priority (its programs dispatched first);
- ``serial``: the edge launch on the current stream after the bulk launch (no fork/join);
- ``fork``: the bulk launch with the stream fork/join around it, the edge launch skipped;
- ``bulk``: the bulk launch alone.

``fork`` and ``bulk`` leave the edge rows unwritten: they are timings, not results. The difference
``full - bulk`` is what the edges cost a call; ``fork - bulk`` what the fork/join alone costs.

Run on the CUDA host from the repository root::

    python3 benchmarks/conv_edges_wall.py --preset varlen --configs "default;EDGES=8,BT_EDGE=8" --out wall.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys

os.environ.setdefault("ASCENDOPT_BACKEND", "cuda")
sys.path.insert(0, os.path.dirname(__file__))

WAYS = ("full", "prio", "serial", "fork", "bulk")
_priority_streams: dict = {}


@contextlib.contextmanager
def edges_as(way: str):
    """Run causal_conv1d's forward with its edge launch as ``way`` (one of ``WAYS``) inside the block."""
    from ascendopt.kernels import causal_conv1d_fwd as fwd

    real_launch, real_overlapped, real_side = fwd.common.launch, fwd.streams.overlapped, fwd.streams.side_stream

    def bulk_only(kernel, grid, *args, **kw):
        if kernel is fwd._causal_conv1d_fwd_kernel and kw.get("TAIL_MODE") != 0:
            return None
        return real_launch(kernel, grid, *args, **kw)

    def serial(side_work, main_work, device):
        main_work()
        side_work()

    def priority_side(device):
        import torch

        index = torch.device(device).index or 0
        if index not in _priority_streams:
            _priority_streams[index] = torch.cuda.Stream(device=index, priority=-10)  # clamped to the highest
        return _priority_streams[index]

    if way == "prio":
        fwd.streams.side_stream = priority_side
    if way in ("fork", "bulk"):
        fwd.common.launch = bulk_only
    if way in ("serial", "bulk"):
        fwd.streams.overlapped = serial
    try:
        yield
    finally:
        fwd.common.launch, fwd.streams.overlapped, fwd.streams.side_stream = real_launch, real_overlapped, real_side


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="varlen")
    ap.add_argument("--configs", default="default", help="';'-separated NAME=VALUE,... overrides (default: none)")
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from stage_breakdown import cuda_backend, parse_variant

    from ascendopt import bench
    from ascendopt.errors import AscendoptError, UsageError
    from ascendopt.kernels import get

    try:
        if args.pairs < 1:
            raise UsageError(f"--pairs {args.pairs}: at least 1 is needed")
        spec = get("causal_conv1d")
        dims = spec.shape(args.preset).dims
        configs = [(text.strip(), spec.config(parse_variant(text))) for text in args.configs.split(";") if text.strip()]
    except AscendoptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    backend = cuda_backend("study")
    if isinstance(backend, int):
        return backend
    device = backend.torch_device()
    sets = [(spec.make_inputs(dict(dims), "bf16", device, seed),) for seed in range(4)]  # 4 x 268 MB: past L2
    names, fns = [], []
    for text, cfg in configs:
        for way in WAYS:
            def call(inp, cfg=cfg, way=way):
                with edges_as(way):
                    spec.run(inp, cfg, "fwd")
            names.append(f"{text} {way}")
            fns.append(call)
    samples, calls = bench.interleaved_samples(fns, inputs=sets, backend=backend, pairs=args.pairs)
    rows = [{"variant": n, "median_us": 1e3 * statistics.median(s), "samples_ms": s} for n, s in zip(names, samples,
                                                                                                     strict=True)]
    print("| variant | median us per call |\n|---|---|")
    for row in rows:
        print(f"| {row['variant']} | {row['median_us']:.2f} |")
    with open(args.out, "w") as f:
        json.dump({"preset": args.preset, "calls_per_sample": calls, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
