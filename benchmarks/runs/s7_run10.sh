#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 10: l2norm D=4096 forward with each row in one warp, in one pass, under the
# host's Triton 3.6 (row_forms_study.py rows<R>: session 5's warp4 put the warps on the chunks under 3.6 and went
# through shared memory, 2.4x slower), against the library's form and fla's kernel at one warp (fla1), traced.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run10.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/sass_stats.py --case l2norm_forms > $R/sass_forms.md 2>/dev/null; tail -2 $R/sass_forms.md
python3 benchmarks/row_forms_study.py --forms lib,rows4,rows2,fla1 --out $R/forms.json --trace $R/trace.json \
  2>&1 | tail -4
python3 benchmarks/kernel_gaps.py $R/trace.json --min-us 20 --batches auto | tail -4 | tee $R/gaps.md
gzip -9 $R/trace.json
tar -czf $OUT/run10.tar.gz -C $R .
