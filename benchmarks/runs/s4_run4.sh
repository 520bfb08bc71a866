#!/usr/bin/env bash
# Session 4 (2026-12-01), device call 4: causal_conv1d forward with its edge launch on a side stream
# (EDGES=4, the cuda default of this commit) against EDGES=1 (same kernels, one stream) and EDGES=2,
# timed as whole calls (device time, interleaved with fla); the gate's check of each on the device.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run4.tar.gz.
set -u
R=$(mktemp -d)
for E in 4 1 2; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets realistic,varlen --config EDGES=$E \
    --out $R/conv_edges$E.json --budget-s 100 2>/dev/null | grep "^| causal"
done
python3 benchmarks/stage_breakdown.py --dtype bf16 --calls 20 --kernel causal_conv1d --preset varlen --mode fwdbwd \
  --check --out $R/conv_varlen_check.json --variants "default;EDGES=1" 2>/dev/null | grep "correctness\|device time"
python3 benchmarks/stage_breakdown.py --dtype bf16 --calls 20 --kernel causal_conv1d --preset states --mode fwdbwd \
  --check --out $R/conv_states_check.json --variants "default;EDGES=1" 2>/dev/null | grep "correctness\|device time"
tar -czf $OUT/run4.tar.gz -C $R .
