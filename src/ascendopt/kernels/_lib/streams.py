"""Two independent launches at once on CUDA: one on a side stream, joined before the caller goes on.

A kernel's small edge launch (a few hundred programs) runs at the device's latency, not its bandwidth:
after a bulk launch on the same stream it adds its whole duration (causal_conv1d forward on the H200:
3.8 us after a 70.5 us bulk launch, benchmarks/RESULTS.md). Issued on a second stream it runs beside
the bulk launch, in the SM slots the bulk launch leaves free.

The side stream waits for the current stream before its work (its inputs were written there), and the
current stream waits for the side stream after it, so everything later on the current stream, frees
of the outputs by the caching allocator included, is ordered after both launches.
"""

from __future__ import annotations

_side: dict = {}  # device index -> its side stream (created once; streams are cheap to keep)


def side_stream(device):
    """The side stream of CUDA ``device`` (a torch.device or index)."""
    import torch

    index = torch.device(device).index
    if index is None:
        index = torch.cuda.current_device()
    stream = _side.get(index)
    if stream is None:
        stream = _side[index] = torch.cuda.Stream(device=index)
    return stream


def overlapped(side_work, main_work, device) -> None:
    """``side_work()`` on ``device``'s side stream and ``main_work()`` on the current stream, concurrently;
    both are done, as far as later work on the current stream can tell, when this returns.

    ``side_work`` is issued first, so its few programs start ahead of the bulk ones."""
    import torch

    main = torch.cuda.current_stream(device)
    side = side_stream(device)
    side.wait_stream(main)
    with torch.cuda.stream(side):
        side_work()
    main_work()
    main.wait_stream(side)
