#!/usr/bin/env bash
# Session 6 (2026-12-01), device call 5: causal_conv1d forward with varlen bulk tiles decoded from a table of first
# packed rows (STARTS) in the row-path edge modes: the default (EDGES=4) and EDGES=7/8 at BT_EDGE=8, wall time
# against the bulk launch alone, then interleaved with fla (forward).
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run5.tar.gz.
set -u
R=$(mktemp -d)
for P in varlen realistic; do
  python3 benchmarks/conv_edges_wall.py --preset $P --pairs 30 \
    --configs "default;EDGES=7,BT_EDGE=8;EDGES=8,BT_EDGE=8" --out $R/wall_$P.json 2>&1 \
    | grep "full\|bulk\|fork" | sed "s/^/$P /"
done
for C in default EDGES=7,BT_EDGE=8 EDGES=8,BT_EDGE=8; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets varlen,realistic --modes fwd \
    --config "${C/default/}" --out $R/conv_${C//[=,]/_}.json --budget-s 60 2>/dev/null | grep "^| causal" | sed "s/^/$C /"
done
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset varlen --mode fwdbwd \
  --variants "default;EDGES=7,BT_EDGE=8" --check --calls 3 --out $R/sb_varlen.json 2>&1 | grep "correctness\|^| [dE]"
tar -czf $OUT/run5.tar.gz -C $R .
