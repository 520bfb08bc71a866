#!/usr/bin/env bash
# Session 7 (2026-12-01), device call 11: the vector kernels' table at this session's library (unchanged since
# session 6's defaults), with the new column: each memory-bound case against a device copy of the same bytes
# (kernels.py same_size_copy_ms), so launch-bound shapes (chunk_local_cumsum's [B,T,H], 4 MB) are set against a
# transfer of their own size as well as against the 1 GiB copy bandwidth.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run11.tar.gz.
set -u
R=$(mktemp -d)
python3 benchmarks/kernels.py --kernels rms_norm,l2norm,causal_conv1d,chunk_local_cumsum \
  --presets realistic,widest,wide,varlen,realistic_vector,realistic_varlen --out $R/vector_kernels.json \
  --budget-s 240 2>/dev/null | tail -22
tar -czf $OUT/run11.tar.gz -C $R .
