#!/usr/bin/env bash
# Session 5 (2026-12-01), device call 6: the l2norm forward at D=4096 with each row held by one warp (form
# warp4 of benchmarks/row_forms_study.py: no cross-warp reduction, no barrier between loads and stores)
# against the library's form and fla, same run.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run6.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/row_forms_study.py --forms lib,warp4,one2 --out $R/forms.json 2>$R/forms.err | tee $R/forms.md
tar -czf $OUT/run6.tar.gz -C $R .
