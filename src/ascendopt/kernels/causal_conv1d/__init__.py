"""causal_conv1d: the op and its spec (``op``), forward and backward kernels (``fwd``, ``bwd``), the
bulk/tail tile plan (``plan``) and the tile-path building blocks (``tiles``, ``rows``)."""

from ascendopt.kernels.causal_conv1d.op import SPEC, causal_conv1d, causal_conv1d_reference

__all__ = ["SPEC", "causal_conv1d", "causal_conv1d_reference"]
