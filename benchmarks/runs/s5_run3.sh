#!/usr/bin/env bash
# Session 5 (2026-12-01), device call 3: causal_conv1d forward, time tile of the edge tiles (BT_EDGE) under
# the default EDGES=4: the edge launch as more, shorter programs beside the bulk launch.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run3.tar.gz.
set -u
R=$(mktemp -d)
for C in BT_EDGE=16 BT_EDGE=32 BT_EDGE=8 default; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets realistic,varlen --config "${C/default/}" \
    --out $R/conv_${C//[=,]/_}.json --budget-s 60 2>/dev/null | grep "^| causal" | sed "s/^/$C /"
done
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset varlen \
  --variants "default;BT_EDGE=16;BT_EDGE=32;BT_EDGE=8" --per-launch --check --out $R/sb_varlen.json 2>&1 \
  | grep -B1 -A6 "^| kernel\|^| variant" | grep -v "^--"
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset states --mode fwdbwd \
  --variants "BT_EDGE=16;BT_EDGE=8" --check --out $R/sb_states.json 2>&1 | grep "correctness\|^| BT_EDGE"
tar -czf $OUT/run3.tar.gz -C $R .
