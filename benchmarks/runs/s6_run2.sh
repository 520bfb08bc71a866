#!/usr/bin/env bash
# Session 6 (2026-12-01), device call 2: causal_conv1d forward with EDGES=8 (bulk tiles W-1 rows into each
# sequence, its last bulk tile shifted back to end at the sequence's end, so only its first W-1 rows are an edge
# piece, as masked rows on a side stream), against the default and run 1's best (EDGES=7,BT_EDGE=8), interleaved
# with fla; forward and forward+backward at EDGES=8; per launch and the gate's check on varlen and states.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run2.tar.gz.
set -u
R=$(mktemp -d)
for C in default EDGES=8 EDGES=8,BT_EDGE=8 EDGES=7,BT_EDGE=8; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets varlen,realistic --modes fwd \
    --config "${C/default/}" --out $R/conv_${C//[=,]/_}.json --budget-s 60 2>/dev/null | grep "^| causal" | sed "s/^/$C /"
done
python3 benchmarks/kernels.py --kernels causal_conv1d --presets varlen,realistic --config EDGES=8 \
  --out $R/conv_EDGES_8_all.json --budget-s 120 2>/dev/null | grep "^| causal" | sed "s/^/EDGES=8 (both modes) /"
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset varlen --mode fwd \
  --variants "default;EDGES=8;EDGES=8,BT_EDGE=8" --per-launch --check \
  --out $R/sb_varlen.json 2>&1 | grep -A6 "^| kernel\|^| variant\|correctness" | grep -v "^--"
for P in states realistic; do
  python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset $P --mode fwdbwd \
    --variants "EDGES=8;EDGES=8,BT_EDGE=8" --check --calls 3 \
    --out $R/sb_${P}.json 2>&1 | grep "correctness\|^| EDGES"
done
tar -czf $OUT/run2.tar.gz -C $R .
