#!/usr/bin/env bash
# Session 6 (2026-12-01), device call 3: what causal_conv1d's forward edge launch costs a call's wall time
# (benchmarks/conv_edges_wall.py: the call, with a high-priority side stream, serial, the fork/join without the
# edge launch, the bulk launch alone), at the default (EDGES=4) and EDGES=7/8 with BT_EDGE=8.
# Run from the repository root on the CUDA host with $OUT set; results are packed into $OUT/run3.tar.gz.
set -u
R=$(mktemp -d)
for P in varlen realistic; do
  python3 benchmarks/conv_edges_wall.py --preset $P --pairs 30 \
    --configs "default;EDGES=7,BT_EDGE=8;EDGES=8,BT_EDGE=8" --out $R/wall_$P.json 2>&1 | sed "s/^/$P /"
done
tar -czf $OUT/run3.tar.gz -C $R .
