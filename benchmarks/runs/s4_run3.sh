#!/usr/bin/env bash
# Session 4 (2026-12-01), device call 3: causal_conv1d forward with EDGES=2 as the cuda default (slimmer
# masked rows: int32 per-row predicates), per launch and with the gate's check; then the vector kernels'
# table with this commit's defaults (one program per tile for streaming row kernels, 16-row tiles).
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run3.tar.gz.
set -u
R=$(mktemp -d)
SB="python3 benchmarks/stage_breakdown.py --dtype bf16 --calls 20"
for P in realistic varlen; do
  $SB --kernel causal_conv1d --preset $P --mode fwd --per-launch --check --out $R/conv_${P}.json \
    --variants "peer;default;EDGES=1;EDGES=2,AHEAD=2;EDGES=2,BT=32" 2>/dev/null
done
python3 benchmarks/kernels.py --kernels rms_norm,l2norm,causal_conv1d,chunk_local_cumsum \
  --presets realistic,widest,wide,varlen,realistic_vector,realistic_varlen --out $R/vector_kernels.json \
  --budget-s 200 2>&1 | tail -30
tar -czf $OUT/run3.tar.gz -C $R .
