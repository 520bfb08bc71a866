#!/usr/bin/env bash
# Session 5 (2026-12-01), device call 2: (a) the norms with the streaming cache hints (default on cuda) and
# without (ASCENDOPT_CUDA_STREAM_HINTS=0), same run, against fla; (b) causal_conv1d forward edges: EDGES=6
# (edge launch issued after the bulk launch), EDGES=5 with clamped halo loads, EDGES=4 (default); per launch,
# and the gate's check for EDGES=6 on varlen and states.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run2.tar.gz.
set -u
R=$(mktemp -d)
for H in 1 0; do
  ASCENDOPT_CUDA_STREAM_HINTS=$H python3 benchmarks/kernels.py --kernels l2norm,rms_norm \
    --presets realistic,wide,widest --out $R/norms_hints$H.json --budget-s 150 2>/dev/null | grep "^| [lr]" | sed "s/^/hints=$H /"
done
for C in EDGES=6 EDGES=5 default; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets realistic,varlen --config "${C/default/}" \
    --out $R/conv_${C//[=,]/_}.json --budget-s 60 2>/dev/null | grep "^| causal" | sed "s/^/$C /"
done
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset varlen \
  --variants "EDGES=4;EDGES=6;EDGES=5" --per-launch --check --out $R/sb_varlen.json 2>&1 | grep -A12 "^| variant"
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset states --mode fwdbwd \
  --variants "EDGES=6" --check --out $R/sb_states.json 2>&1 | grep "correctness\|^| variant\|^| EDGES"
tar -czf $OUT/run2.tar.gz -C $R .
