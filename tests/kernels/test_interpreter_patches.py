"""The interpreter patches of tests/conftest.py do what they claim (they must be able to fail)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _to_bf16_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(tl.bfloat16), mask=mask)


@triton.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    b = tl.load(b_ptr + r[:, None] * N + r[None, :])
    tl.store(c_ptr + r[:, None] * N + r[None, :], tl.dot(a, b))


def test_fp32_to_bf16_cast_rounds_like_torch():
    x = torch.randn(1024, generator=torch.Generator().manual_seed(0))
    y = torch.empty(1024, dtype=torch.bfloat16)
    _to_bf16_kernel[(1,)](x, y, 1024, BLOCK=1024)
    assert torch.equal(y, x.to(torch.bfloat16))


def test_bf16_dot_is_exact_in_fp32():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(16, 16, generator=g).to(torch.bfloat16)
    b = torch.randn(16, 16, generator=g).to(torch.bfloat16)
    c = torch.empty(16, 16, dtype=torch.float32)
    _dot_kernel[(1,)](a, b, c, N=16)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-5)
