#!/usr/bin/env bash
# Session 4 (2026-12-01), device call 6: the vector kernels' table at this commit's defaults (one run),
# and the gate's check of the norms' new cuda tiles on the device.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run6.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/kernels.py --kernels rms_norm,l2norm,causal_conv1d,chunk_local_cumsum \
  --presets realistic,widest,wide,varlen,realistic_vector,realistic_varlen --out $R/vector_kernels.json \
  --budget-s 180 2>/dev/null | tail -20
for K in l2norm rms_norm; do
  for P in realistic widest; do
    python3 benchmarks/stage_breakdown.py --dtype bf16 --calls 5 --kernel $K --preset $P --mode fwdbwd --check \
      --out $R/check_${K}_$P.json --variants default 2>/dev/null | grep "correctness" | sed "s/^/$K $P /"
  done
done
tar -czf $OUT/run6.tar.gz -C $R .
