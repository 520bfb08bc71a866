"""Helpers shared by the bundled kernels: launch, allocation, dtypes and the UB context (``common``), the
row-wise tile plan (``rowwise``), CUDA residency (``resident``) and side streams (``streams``)."""
