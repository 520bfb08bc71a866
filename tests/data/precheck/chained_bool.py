"""A kernel the triton-ascend 3.2 front end rejects: a chained boolean operator (written for ascendopt).

triton 3.2's code generator raises UnsupportedLanguageConstruct for ``A and B and C``; upstream triton
3.7 and the CPU interpreter accept it, so only the lowering check sees it (docs/lowering.md).
"""

import triton
import triton.language as tl


@triton.jit
def clamp_window_kernel(x_ptr, out_ptr, n, W: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    for k in range(0, 4):
        if W > 2 and k >= 3 - W and k <= 2:
            x = x * 2.0
    tl.store(out_ptr + offsets, x, mask=offsets < n)
