#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 6: l2norm D=4096 forward. Run 5: with the L2 flushed before each launch ours
# and fla's take the same time; left warm, ours is ~1.5 us slower. Here, with the L2 left warm and the clocks
# free, each kernel after itself (as in the timed batches) and alternating: duration, DRAM bytes read and
# written, L2 read hits and misses, per-SM active cycles (ncu_metrics.py); and the same with the L2 flushed.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run6.tar.gz.
set -u
R=$(mktemp -d)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
M=$M,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum
M=$M,lts__t_sectors_srcunit_tex_op_write.sum,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max
M=$M,gpc__cycles_elapsed.max
for SEQ in "same:default;default;default;default;peer;peer;peer;peer" "alt:default;peer;default;peer;default;peer"; do
  for CACHE in none all; do
    F=$R/ncu_${SEQ%%:*}_cache_$CACHE.csv
    $NCU --profile-from-start off --csv --page raw --cache-control $CACHE --clock-control none --metrics $M \
      python3 benchmarks/ncu_workload.py --kernel l2norm --preset wide --dtype bf16 --mode fwd \
      --variants "${SEQ#*:}" > $F 2>${F%.csv}.err
    python3 benchmarks/ncu_metrics.py $F --metrics $M
  done
done
tar -czf $OUT/run6.tar.gz -C $R .
