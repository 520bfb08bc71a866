"""Numerical helpers shared by the kernel tests (imported as a plain module: tests/ is on sys.path)."""

import torch

# Relative RMS error allowed against the fp32 oracle, per input dtype.
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


def rel_rms(result, reference) -> float:
    """RMS of ``result - reference`` relative to the RMS of ``reference`` (in float64)."""
    diff = result.double() - reference.double()
    return float(diff.pow(2).mean().sqrt() / reference.double().pow(2).mean().sqrt())
