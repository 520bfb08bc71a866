#!/usr/bin/env bash
# Session 4 (2026-12-01), device call 1: l2norm tiles / prefetch / grid, fla's autotuned choices,
# causal_conv1d bulk vs tail launch, Nsight Compute of l2norm ours vs fla. Run from the repository
# root on the CUDA host with $OUT set; every result lands in $OUT.
set -u
SB="python3 benchmarks/stage_breakdown.py --dtype bf16 --calls 20"
for P in realistic wide; do
  $SB --kernel l2norm --preset $P --mode fwd --out $OUT/l2_${P}_fwd.json \
    --variants "peer;default;prefetch=2;block_rows=32,prefetch=2;block_rows=16,prefetch=2;block_rows=128;block_rows=1,prefetch=2" 2>/dev/null
  for PPS in 8 100000; do
    ASCENDOPT_CUDA_PROGRAMS_PER_SM=$PPS $SB --kernel l2norm --preset $P --mode fwd --out $OUT/l2_${P}_fwd_pps$PPS.json \
      --variants "default;prefetch=2;block_rows=32,prefetch=2;block_rows=16,prefetch=2" 2>/dev/null
  done
  $SB --kernel l2norm --preset $P --mode fwdbwd --out $OUT/l2_${P}_fwdbwd.json \
    --variants "peer;default;prefetch=2;block_rows_bwd=16,prefetch=2;block_rows_bwd=32" 2>/dev/null
done
python3 - <<'PY' > $OUT/fla_l2norm_configs.txt 2>&1
import torch
from fla.modules.norm import l2norm as m
for shape in [(4, 4096, 32, 128), (4, 4096, 4096)]:
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    m.l2norm(x).backward(torch.randn_like(x))
torch.cuda.synchronize()
for name in ("l2norm_fwd_kernel", "l2norm_bwd_kernel", "l2norm_fwd_kernel_row", "l2norm_bwd_kernel_row"):
    k = getattr(m, name)
    print(name, {str(key): str(cfg) for key, cfg in getattr(k, "cache", {}).items()})
PY
cat $OUT/fla_l2norm_configs.txt
for P in realistic varlen; do
  $SB --kernel causal_conv1d --preset $P --mode fwd --per-launch --out $OUT/conv_${P}_launches.json \
    --variants "peer;default;BT=128;BT=32" 2>/dev/null
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$NCU --profile-from-start off --section LaunchStats --section Occupancy --section SpeedOfLight \
  --section WarpStateStats --section MemoryWorkloadAnalysis --csv --page details \
  python3 benchmarks/ncu_workload.py --kernel l2norm --preset realistic --dtype bf16 --mode fwd \
  --variants "default;prefetch=2;peer" > $OUT/ncu_l2norm.csv 2>$OUT/ncu_l2norm.err
tail -3 $OUT/ncu_l2norm.err
