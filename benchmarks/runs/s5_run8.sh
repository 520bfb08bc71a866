#!/usr/bin/env bash
# Session 5 (2026-12-01), device call 8: causal_conv1d with BWD_GRID=2 as the cuda default, against fla
# (interleaved, forward and forward+backward), and the gate's check on states at the new default.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run8.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/kernels.py --kernels causal_conv1d --presets realistic,varlen --out $R/conv.json \
  --budget-s 90 2>/dev/null | grep "^| causal"
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset states --mode fwdbwd --check --calls 5 \
  --variants default --out $R/check_states.json 2>/dev/null | grep "correctness\|^| default"
tar -czf $OUT/run8.tar.gz -C $R .
