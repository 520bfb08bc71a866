#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 5 (call 4 ran with the loop variable named CC, which Triton takes as its C compiler: every launch failed): l2norm D=4096 forward. Run 3 placed the gap in the kernels (in the timed
# batches ours runs 66.5 us a launch, fla's 65.7; the gaps between launches are equal) although ncu (L2 flushed,
# clocks locked) showed none in run 1. Here: (1) ncu's duration of ours and fla's alternating, with the L2 left
# warm and/or the clocks free, to find which condition brings the gap out; (2) row_forms_study.py vec<R> (8-byte
# accesses, so a 4-warp instruction spans 1 KB as fla's 2-warp one does), traced as in run 3.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run5.tar.gz.
set -u
R=$(mktemp -d)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
V="default;peer;default;peer;default;peer;default;peer"
for MODE in "all base" "none base" "all none" "none none"; do
  set -- $MODE
  $NCU --profile-from-start off --csv --page raw --cache-control $1 --clock-control $2 \
    --metrics gpu__time_duration.sum \
    python3 benchmarks/ncu_workload.py --kernel l2norm --preset wide --dtype bf16 --mode fwd --variants "$V" \
    > $R/ncu_cache_$1_clock_$2.csv 2>$R/ncu_cache_$1_clock_$2.err
  echo "cache $1 clock $2:" $(python3 -c "
import sys, pandas as pd
f = pd.read_csv(sys.argv[1], skiprows=[1])
f['d'] = pd.to_numeric(f['gpu__time_duration.sum'], errors='coerce')
for k, g in f.groupby('Kernel Name'): print(k, [round(v / 1e3, 2) for v in g['d']])
" $R/ncu_cache_$1_clock_$2.csv 2>&1 | tr '\n' ' ')
done
python3 benchmarks/row_forms_study.py --forms lib,vec1,vec2,one1 --pairs 10 --out $R/forms.json \
  --trace $R/trace.json 2>&1 | grep "^|"
python3 benchmarks/kernel_gaps.py $R/trace.json --min-us 20 --batches 15 | tee $R/gaps.md
gzip -9 $R/trace.json
tar -czf $OUT/run5.tar.gz -C $R .
