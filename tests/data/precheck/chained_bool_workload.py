"""Own-code workload for the loop's precheck test: workload() launches chained_bool.py's kernel (written for
ascendopt). Under precheck the launch is recorded, never run."""

import torch
from chained_bool import clamp_window_kernel


def workload():
    x = torch.randn(512)
    out = torch.empty_like(x)
    clamp_window_kernel[(2,)](x, out, x.numel(), W=3, BLOCK=256)
    return out
