"""ascendopt: the six-step kernel optimization loop for Triton-Ascend kernels as a tool.

Importing this package is cheap: it imports neither torch nor triton. Heavy entry points are
loaded on first use (``ascendopt.profile_callable`` pulls in the collector lazily).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "profile_callable"]


def __getattr__(name: str):
    # Lazy so that `ascendopt --help` and `import ascendopt` stay free of torch.
    if name == "profile_callable":
        from ascendopt.collect import profile_callable

        return profile_callable
    raise AttributeError(f"module 'ascendopt' has no attribute {name!r}")
