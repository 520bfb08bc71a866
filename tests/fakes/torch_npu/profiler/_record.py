"""Call recording for the fake profiler: every public call lands in ``torch_npu.CALLS`` exactly as
passed (positional args and keywords, before defaults are applied)."""

from __future__ import annotations

import functools

import torch_npu


def recorded(name: str):
    """Decorator: record ``(name, args, kwargs)`` then call the function with the real signature
    (``inspect.signature`` follows ``__wrapped__``, so the fake's signature is the real one)."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            passed = args[1:] if fn.__name__ == "__init__" else args  # a constructor's self is not an argument
            torch_npu.CALLS.append((name, passed, dict(kwargs)))
            return fn(*args, **kwargs)

        return inner

    return wrap
