#!/usr/bin/env bash
# Session 6 (2026-12-01), device call 7: l2norm D=4096 forward, each row in one warp without a barrier before its
# stores (row_forms_study.py two<R>: the sums of squares in a first pass over 256-column chunks, the chunks read
# again from L2 and stored in a second), against the library's form and fla.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run7.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/row_forms_study.py --forms lib,two4,two8,one2 --out $R/forms.json 2>&1 | tail -5
tar -czf $OUT/run7.tar.gz -C $R .
