#!/usr/bin/env bash
# Session 6 (2026-12-01), device call 1: causal_conv1d forward with the edges on the row path on a side stream
# (EDGES=6: edge tiles of BT_EDGE rows as masked rows; EDGES=7: bulk tiles W-1 rows in, the pieces as masked rows)
# against the default (EDGES=4) and session 5's best (EDGES=5,BT_EDGE=16), interleaved with fla; per launch and
# the gate's check; l2norm D=4096 forward: load-hint forms, and Nsight Compute of ours vs fla.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run1.tar.gz.
set -u
R=$(mktemp -d)
for C in default EDGES=5,BT_EDGE=16 EDGES=6 EDGES=6,BT_EDGE=16 EDGES=6,BT_EDGE=8 EDGES=7 EDGES=7,BT_EDGE=16 \
         EDGES=7,BT_EDGE=8 EDGES=7,BT_EDGE=4; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets varlen,realistic --modes fwd \
    --config "${C/default/}" --out $R/conv_${C//[=,]/_}.json --budget-s 60 2>/dev/null | grep "^| causal" | sed "s/^/$C /"
done
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset varlen --mode fwd \
  --variants "default;EDGES=6,BT_EDGE=16;EDGES=7,BT_EDGE=16;EDGES=7,BT_EDGE=4" --per-launch --check \
  --out $R/sb_varlen.json 2>&1 | grep -A6 "^| kernel\|^| variant\|correctness" | grep -v "^--"
python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset states --mode fwdbwd \
  --variants "EDGES=6,BT_EDGE=16;EDGES=7,BT_EDGE=16;EDGES=7,BT_EDGE=4" --check --calls 3 \
  --out $R/sb_states.json 2>&1 | grep "correctness\|^| EDGES"
python3 benchmarks/row_forms_study.py --forms lib,one2,one2e,one2g,one1e,one1g --out $R/forms.json 2>&1 | tail -8
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$NCU --profile-from-start off --section LaunchStats --section Occupancy --section SpeedOfLight \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --csv --page details \
  python3 benchmarks/ncu_workload.py --kernel l2norm --preset wide --dtype bf16 --mode fwd \
  --variants "default;peer" > $R/ncu_l2norm_wide.csv 2>$R/ncu_l2norm_wide.err
tail -3 $R/ncu_l2norm_wide.err
tar -czf $OUT/run1.tar.gz -C $R .
