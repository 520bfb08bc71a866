#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 2: l2norm D=4096 forward, ours against fla inside the interleaved timing
# (row_forms_study.py), traced with Nsight Systems: each kernel's duration and the idle gap before it, so the
# ~1.5 % the events see (ncu shows none: run 1) is placed in the kernels or between them.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run2.tar.gz.
set -u
R=$(mktemp -d)
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: $NSYS"
$NSYS profile -t cuda -o $R/trace --force-overwrite true \
  python3 benchmarks/row_forms_study.py --forms lib,one1 --pairs 10 --out $R/forms.json 2>&1 | grep "^|"
$NSYS export --type sqlite -o $R/trace.sqlite $R/trace.nsys-rep >/dev/null 2>&1
python3 benchmarks/kernel_gaps.py $R/trace.sqlite --min-us 20 | tee $R/gaps.md
rm -f $R/trace.nsys-rep
tar -czf $OUT/run2.tar.gz -C $R .
