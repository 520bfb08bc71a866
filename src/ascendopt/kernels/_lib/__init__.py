"""Helpers shared by the bundled kernels: launch and allocation (``common``), the row-wise tile plan
(``rowwise``), CUDA residency (``resident``) and side streams (``streams``)."""
