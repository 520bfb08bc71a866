#!/usr/bin/env bash
# Session 4 (2026-12-01), device call 7: causal_conv1d forward, channel tile of the edge tiles (BD_EDGE)
# under EDGES=4: fewer, wider edge programs hold fewer SM slots beside the bulk launch.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run7.tar.gz.
set -u
R=$(mktemp -d)
for C in BD_EDGE=256 BD_EDGE=128 default; do
  python3 benchmarks/kernels.py --kernels causal_conv1d --presets realistic,varlen --config "${C/default/}" \
    --out $R/conv_${C/=/}.json --budget-s 60 2>/dev/null | grep "^| causal" | sed "s/^/$C /"
done
tar -czf $OUT/run7.tar.gz -C $R .
