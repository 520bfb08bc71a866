#!/usr/bin/env bash
# Session 4 (2026-12-01), device call 2: the norms' row tile under one program per task (no persistent
# loop), and causal_conv1d's forward edge tiles as masked rows (EDGES), with the gate's check.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run2.tar.gz.
set -u
R=$(mktemp -d)
SB="python3 benchmarks/stage_breakdown.py --dtype bf16 --calls 20"
NP="env ASCENDOPT_CUDA_PROGRAMS_PER_SM=100000"  # a grid of one program per task
$NP $SB --kernel l2norm --preset realistic --mode fwd --out $R/l2_realistic_fwd.json \
  --variants "peer;block_rows=8;block_rows=16;block_rows=32;default" 2>/dev/null
$NP $SB --kernel l2norm --preset wide --mode fwd --out $R/l2_wide_fwd.json \
  --variants "peer;block_rows=1;default;block_rows=4" 2>/dev/null
$NP $SB --kernel l2norm --preset realistic --mode fwdbwd --out $R/l2_realistic_fwdbwd.json \
  --variants "peer;block_rows=16,block_rows_bwd=8;block_rows=16,block_rows_bwd=16;block_rows=16" 2>/dev/null
$NP $SB --kernel l2norm --preset wide --mode fwdbwd --out $R/l2_wide_fwdbwd.json \
  --variants "peer;block_rows=1;default" 2>/dev/null
for P in realistic widest; do
  $NP $SB --kernel rms_norm --preset $P --mode fwd --out $R/rms_${P}_fwd_np.json \
    --variants "peer;block_rows=1;block_rows=2;default" 2>/dev/null
  $SB --kernel rms_norm --preset $P --mode fwd --out $R/rms_${P}_fwd.json --variants "default" 2>/dev/null
done
for P in realistic varlen; do
  $SB --kernel causal_conv1d --preset $P --mode fwd --per-launch --check --out $R/conv_${P}.json \
    --variants "peer;default;EDGES=2;EDGES=3;EDGES=2,BT=128;EDGES=3,BT=128;EDGES=2,BT=32" 2>/dev/null
done
tar -czf $OUT/run2.tar.gz -C $R .
