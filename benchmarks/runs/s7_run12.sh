#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 12: chunk_local_cumsum's [B,T,H] presets (4 MB, 256 tiles of [64, 32] at
# the default block_c) ran at 67-71 % of a same-size copy in run 11. Here: narrower tiles (more programs than the
# 132 SMs hold at one tile each) against the default, interleaved with fla as every kernels.py row is.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run12.tar.gz.
set -u
R=$(mktemp -d)
for C in default block_c=16 block_c=8 block_c=4 block_c=2; do
  python3 benchmarks/kernels.py --kernels chunk_local_cumsum --presets realistic,realistic_varlen \
    --config "${C/default/}" --out $R/cumsum_${C//=/_}.json --budget-s 60 2>/dev/null | grep "^| chunk" | sed "s/^/$C /"
done
tar -czf $OUT/run12.tar.gz -C $R .
