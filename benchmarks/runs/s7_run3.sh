#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 3 (call 2 found no nsys on the host): l2norm D=4096 forward, ours against
# fla inside the interleaved timing (row_forms_study.py), traced with torch.profiler: each kernel's duration and
# the idle gap before it (kernel_gaps.py), so the ~1.5 % the events see (ncu shows none: run 1) is placed in the
# kernels or between them; SM clock and power sampled alongside (nvidia-smi, 100 ms).
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run3.tar.gz.
set -u
R=$(mktemp -d)
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 100 \
  > $R/smi.csv 2>/dev/null &
SMI=$!
python3 benchmarks/row_forms_study.py --forms lib,one1 --pairs 10 --out $R/forms.json --trace $R/trace.json \
  2>&1 | grep "^|"
kill $SMI
python3 benchmarks/kernel_gaps.py $R/trace.json --min-us 20 | tee $R/gaps.md
python3 - $R/smi.csv <<'PY'
import sys, pandas as pd
f = pd.read_csv(sys.argv[1], skipinitialspace=True)
for c in f.columns[1:]:
    v = pd.to_numeric(f[c].astype(str).str.extract(r"([\d.]+)")[0], errors="coerce")
    print(f"{c}: min {v.min()} median {v.median()} max {v.max()}")
PY
gzip -9 $R/trace.json
tar -czf $OUT/run3.tar.gz -C $R .
