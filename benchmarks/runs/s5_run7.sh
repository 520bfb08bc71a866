#!/usr/bin/env bash
# Session 5 (2026-12-01), device call 7: causal_conv1d backward with BWD_GRID=2 now asks for its residency
# before the first launch (kernels.resident.residency_before_launch, a compile via warmup): the gate's check on
# realistic and varlen, and the first and a later call's dweight/dbias compared bit for bit.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run7.tar.gz.
set -u
R=$(mktemp -d)
for P in realistic varlen; do
  python3 benchmarks/stage_breakdown.py --kernel causal_conv1d --preset $P --mode fwdbwd --check --calls 5 \
    --variants "BWD_GRID=2;default" --out $R/check_bwdgrid_$P.json 2>/dev/null | grep "correctness\|^| BWD\|^| default" \
    | sed "s/^/$P /"
done
python3 - <<'PY' | tee $R/first_call.txt
import os
os.environ.setdefault("ASCENDOPT_BACKEND", "cuda")
import torch
from ascendopt.kernels import resident
from ascendopt.kernels.causal_conv1d import SPEC
for preset in ("realistic", "varlen"):
    resident.forget()
    inputs = SPEC.make_inputs(SPEC.shape(preset).dims, "bf16", "cuda", 0)
    cfg = SPEC.config({"BWD_GRID": 2})
    first = SPEC.run(inputs, cfg, "fwdbwd")
    later = [SPEC.run(inputs, cfg, "fwdbwd") for _ in range(3)]
    torch.cuda.synchronize()
    same = all(torch.equal(first[k], o[k]) for o in later for k in ("dweight", "dbias", "dx"))
    per_sm = sorted(set(resident._per_sm.values()))
    print(f"{preset}: BWD_GRID=2 first call equals 3 later calls bit for bit: {same}; residency per SM {per_sm}")
PY
tar -czf $OUT/run7.tar.gz -C $R .
