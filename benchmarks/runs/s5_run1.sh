#!/usr/bin/env bash
# Session 5 (2026-12-01), device call 1: (a) forms of the l2norm forward at D=4096 against fla
# (benchmarks/row_forms_study.py); (b) causal_conv1d forward with EDGES=5 (whole sequences in one row-path
# launch: the last tile shifted to end at the sequence end, the first tile's halo masked) at BT 64/128/32
# against the EDGES=4 default, per launch, and the gate's check on varlen and states.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run1.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/row_forms_study.py --out $R/forms.json 2>$R/forms.err | tee $R/forms.md
for C in EDGES=5 EDGES=5,BT=128 EDGES=5,BT=32 default; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets realistic,varlen --config "${C/default/}" \
    --out $R/conv_${C//[=,]/_}.json --budget-s 60 2>/dev/null | grep "^| causal" | sed "s/^/$C /"
done
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset varlen \
  --variants "EDGES=4;EDGES=5;EDGES=5,BT=128" --per-launch --check --out $R/sb_varlen.json 2>&1 | tail -40
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset states --mode fwdbwd \
  --variants "EDGES=5;EDGES=5,BT=128" --check --out $R/sb_states.json 2>&1 | tail -20
tar -czf $OUT/run1.tar.gz -C $R .
