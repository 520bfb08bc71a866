#!/usr/bin/env bash
# Session 5 (2026-12-01), device call 5: the vector kernels' table at this commit's defaults (one run, the
# command of s4_run6), and the gate's check of causal_conv1d at its defaults (forward+backward) on varlen and
# states, after the forward kernel's tile decode was rewritten for EDGES=5.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run5.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/kernels.py --kernels rms_norm,l2norm,causal_conv1d,chunk_local_cumsum \
  --presets realistic,widest,wide,varlen,realistic_vector,realistic_varlen --out $R/vector_kernels.json \
  --budget-s 180 2>/dev/null | tail -20
for P in varlen states; do
  python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset $P --mode fwdbwd --check --calls 5 \
    --variants default --out $R/check_conv_$P.json 2>/dev/null | grep "correctness" | sed "s/^/causal_conv1d $P /"
done
tar -czf $OUT/run5.tar.gz -C $R .
