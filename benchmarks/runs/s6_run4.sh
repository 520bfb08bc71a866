#!/usr/bin/env bash
# Session 6 (2026-12-01), device call 4: causal_conv1d forward with EDGES=9 (as 8, the rows past a sequence's
# last whole bulk tile in a shorter bulk tile instead of a shifted one: nothing computed twice) at BT_EDGE 8 and 4:
# wall time against the bulk launch alone (conv_edges_wall.py), then interleaved with fla (forward and
# forward+backward), per launch and the gate's check on varlen, states and realistic.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run4.tar.gz.
set -u
R=$(mktemp -d)
for P in varlen realistic; do
  python3 benchmarks/conv_edges_wall.py --preset $P --pairs 30 \
    --configs "default;EDGES=8,BT_EDGE=8;EDGES=9,BT_EDGE=8;EDGES=9,BT_EDGE=4" --out $R/wall_$P.json 2>&1 \
    | grep "full\|bulk\|fork" | sed "s/^/$P /"
done
for C in EDGES=9,BT_EDGE=8 EDGES=9,BT_EDGE=4 default; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets varlen,realistic --config "${C/default/}" \
    --out $R/conv_${C//[=,]/_}.json --budget-s 120 2>/dev/null | grep "^| causal" | sed "s/^/$C /"
done
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset varlen --mode fwd \
  --variants "EDGES=9,BT_EDGE=8;EDGES=9,BT_EDGE=4" --per-launch --check \
  --out $R/sb_varlen.json 2>&1 | grep -A6 "^| kernel\|^| variant\|correctness" | grep -v "^--"
for P in states realistic; do
  python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset $P --mode fwdbwd \
    --variants "EDGES=9,BT_EDGE=8;EDGES=9,BT_EDGE=4" --check --calls 3 \
    --out $R/sb_${P}.json 2>&1 | grep "correctness\|^| EDGES"
done
tar -czf $OUT/run4.tar.gz -C $R .
