"""A bundled kernel (one or more configurations) and its fla peer, warmed up, then one profiled call each.

For Nsight Compute runs that compare launches side by side: compiling and fla's autotuning happen
before ``torch.cuda.profiler.start()``, so ``ncu --profile-from-start off`` sees only the measured
calls (one per variant), not the hundreds of autotune launches::

    ncu --profile-from-start off --section LaunchStats --section Occupancy --section SpeedOfLight \
        python3 benchmarks/ncu_workload.py --kernel chunk_gated_delta_rule_fwd --preset realistic \
        --dtype bf16 --variants "default;fuse_state_output=0;peer"

Variants as in ``tools/stage_breakdown.py`` (``default``, ``NAME=VALUE,...``, ``peer``).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("ASCENDOPT_BACKEND", "cuda")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))

from stage_breakdown import add_case_arguments, open_case  # noqa: E402 - after the path insert


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_case_arguments(ap)
    args = ap.parse_args()

    case = open_case(args, "workload")
    if isinstance(case, int):
        return case
    spec, dims, dtype, mode, variants, inputs = case

    import torch

    calls = []
    for name, cfg in variants:
        if cfg is None:
            calls.append((name, lambda peer=spec.extras["peer"]: peer(inputs, mode)))
        else:
            calls.append((name, lambda cfg=cfg: spec.run(inputs, cfg, mode)))
    for _, fn in calls:  # compile, autotune
        fn()
        fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for name, fn in calls:
        with torch.cuda.nvtx.range(name):
            fn()
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("profiled:", ", ".join(name for name, _ in calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
