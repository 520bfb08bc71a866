#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 9: run 8 repeated with more pairs (fla's kernel at 4 and 1 warps, and the
# library's form, each against fla as it runs), to confirm that fla's program at our width lands where ours does.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run9.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/row_forms_study.py --forms fla4,lib,fla1 --pairs 40 --out $R/forms.json 2>&1 | tail -3
tar -czf $OUT/run9.tar.gz -C $R .
