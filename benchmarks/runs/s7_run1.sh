#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 1: l2norm D=4096 forward, new rule-abiding forms against the library's and
# fla's (row_forms_study.py: one<R>s .cs stores only; pair<R> each row on two warps; pre<R> R rows a program with
# the next row's load issued before this row's barrier), and where the SMs idle (per-SM active cycles min/avg/max
# against elapsed, Nsight Compute) for ours vs fla.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run1.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/sass_stats.py --case l2norm_forms > $R/sass_forms.md 2>/dev/null
python3 benchmarks/row_forms_study.py --forms lib,one2,one2s,one1s,pair2,pre8,pre16,pre32,pre64 \
  --out $R/forms.json 2>&1 | tail -10
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$NCU --profile-from-start off --csv --page details \
  --metrics sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,gpc__cycles_elapsed.max,sm__warps_launched.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  python3 benchmarks/ncu_workload.py --kernel l2norm --preset wide --dtype bf16 --mode fwd \
  --variants "default;peer" > $R/ncu_idle.csv 2>$R/ncu_idle.err
tail -3 $R/ncu_idle.err
grep -o '"sm__cycles_active[^"]*","[^"]*","[^"]*"\|"gpc__cycles_elapsed.max","[^"]*","[^"]*"\|"dram__throughput[^"]*","[^"]*","[^"]*"' $R/ncu_idle.csv
tar -czf $OUT/run1.tar.gz -C $R .
