#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 7: l2norm D=4096 forward, rows moved by tensor descriptors (TMA on sm_90:
# row_forms_study.py tma<R>) and 8-byte accesses (vec<R>) against the library's form and fla, traced as in run 3.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run7.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/row_forms_study.py --forms lib,tma1,tma2,tma4,vec1 --out $R/forms.json --trace $R/trace.json \
  2>&1 | tail -6
python3 benchmarks/kernel_gaps.py $R/trace.json --min-us 20 --batches 15 | tail -6 | tee $R/gaps.md
gzip -9 $R/trace.json
tar -czf $OUT/run7.tar.gz -C $R .
