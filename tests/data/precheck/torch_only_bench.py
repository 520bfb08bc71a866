"""An --exec-file whose work is torch ops only: there is no Triton kernel to lower."""

import torch

x = torch.randn(64, 64)


def workload():
    return torch.softmax(x @ x, dim=-1)
