#!/usr/bin/env bash
# Session 4 (2026-12-01), device call 5: causal_conv1d forward time tile with the side-stream edge launch
# (EDGES=4): BT=64 (this commit's default) against BT=32 and BT=128, whole calls, same run.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run5.tar.gz.
set -u
R=$(mktemp -d)
for C in BT=128 BT=32 default; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets realistic,varlen --config "${C/default/}" \
    --out $R/conv_${C/=/}.json --budget-s 100 2>/dev/null | grep "^| causal" | sed "s/^/$C /"
done
tar -czf $OUT/run5.tar.gz -C $R .
