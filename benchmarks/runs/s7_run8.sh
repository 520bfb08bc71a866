#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 8: is the l2norm D=4096 gap the program width? fla's own one-row kernel
# launched at 1, 2 and 4 warps (row_forms_study.py fla<W>) against fla as it runs (autotuned), beside the library's
# form, in the same timed batches, traced (kernel_gaps.py). At 4 warps fla's program is as wide as ours.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run8.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/row_forms_study.py --forms lib,fla1,fla2,fla4 --out $R/forms.json --trace $R/trace.json \
  2>&1 | tail -5
python3 benchmarks/kernel_gaps.py $R/trace.json --min-us 20 --batches 15 | tail -5 | tee $R/gaps.md
gzip -9 $R/trace.json
tar -czf $OUT/run8.tar.gz -C $R .
