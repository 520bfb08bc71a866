#!/usr/bin/env bash
# Session 5 (2026-12-01), device call 4: causal_conv1d forward with EDGES=5 (bulk tiles start W-1 rows into each
# sequence, so a sequence's head edge is W-1 rows; the edges as pieces of at most BT_EDGE rows on a side stream)
# at BT_EDGE 64 (auto) / 16 / 8, against the default EDGES=4; per launch; the gate's check on varlen and states.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run4.tar.gz.
set -u
R=$(mktemp -d)
for C in EDGES=5 EDGES=5,BT_EDGE=16 EDGES=5,BT_EDGE=8 default; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets realistic,varlen --config "${C/default/}" \
    --out $R/conv_${C//[=,]/_}.json --budget-s 60 2>/dev/null | grep "^| causal" | sed "s/^/$C /"
done
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset varlen \
  --variants "default;EDGES=5;EDGES=5,BT_EDGE=16;EDGES=5,BT_EDGE=8" --per-launch --check --out $R/sb_varlen.json \
  2>&1 | grep -A6 "^| kernel\|^| variant" | grep -v "^--"
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset states --mode fwdbwd \
  --variants "EDGES=5;EDGES=5,BT_EDGE=16" --check --out $R/sb_states.json 2>&1 | grep "correctness\|^| EDGES"
tar -czf $OUT/run4.tar.gz -C $R .
