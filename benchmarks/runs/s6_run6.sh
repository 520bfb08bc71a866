#!/usr/bin/env bash
# Session 6 (2026-12-01), device call 6: the vector kernels at this session's defaults (causal_conv1d forward:
# EDGES=7, BT_EDGE=8 on cuda) against fla, interleaved (same command as session 5's run 5), and the gate's check of
# causal_conv1d at its defaults on varlen and states.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run6.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/kernels.py --kernels rms_norm,l2norm,causal_conv1d,chunk_local_cumsum \
  --presets realistic,widest,wide,varlen,realistic_vector,realistic_varlen --out $R/vector_kernels.json \
  --budget-s 180 2>/dev/null | tail -20
for P in varlen states; do
  python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset $P --mode fwdbwd --check --calls 5 \
    --variants default --out $R/check_conv_$P.json 2>/dev/null | grep "correctness" | sed "s/^/causal_conv1d $P /"
done
tar -czf $OUT/run6.tar.gz -C $R .
