"""Workload for precheck --exec-file: launches the kernels of vector_add.py on CPU tensors (recorded, not run)."""

import torch
from vector_add import add_kernel, matmul_kernel

n = 4096
x, y = torch.randn(n), torch.randn(n)
out = torch.empty_like(x)
for block in (1024, 2048):
    add_kernel[((n + block - 1) // block,)](x, y, out, n, BLOCK=block)
a, b = torch.randn(64, 32, dtype=torch.float16), torch.randn(32, 64, dtype=torch.float16)
c = torch.empty(64, 64)
matmul_kernel[(24,)](a, b, c, M=64, N=64, K=32)
