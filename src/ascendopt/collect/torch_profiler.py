"""cuda and cpu collection with ``torch.profiler``: ``trace.json`` + ``kernels.csv`` in one folder.

cuda records CPU + CUDA activity (Triton kernels appear under their ``@triton.jit`` names); cpu
records CPU activity only, where Triton kernels run in the interpreter. Neither has hardware
counters here: on cuda they come from Nsight Compute in a second run (``collect.ncu``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from ascendopt.collect import kernel_table
from ascendopt.collect.names import profile_folder
from ascendopt.collect.native_log import quiet_profiler
from ascendopt.collect.settings import ProfileSettings


@contextlib.contextmanager
def name_interpreted_kernels() -> Iterator[set[str]]:
    """Open a profiler range named after each Triton kernel the interpreter runs.

    A user's exec-file launches ``kernel[grid](...)`` directly, not through
    ``kernels._lib.common.launch``, and the interpreter runs it as plain Python, so without a range
    the CPU profile could not show which kernel ran. The hook wraps
    ``InterpretedFunction.run`` (triton's interpreter entry point for ``kernel[grid](...)``);
    if that entry point is missing in some triton version the profile still has the ranges of
    bundled kernels.

    Yields the set of kernel names launched while the hook is open: a fresh set per use, so one
    profiling run never filters its ranges by kernels that ran in an earlier run of the process.
    """
    import torch

    launched: set[str] = set()
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        yield launched
        return
    original = InterpretedFunction.run

    def run(self, *args, **kwargs):
        name = getattr(self.fn, "__name__", "triton_kernel")
        if kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        launched.add(name)
        with torch.profiler.record_function(name):
            return original(self, *args, **kwargs)

    InterpretedFunction.run = run
    try:
        yield launched
    finally:
        InterpretedFunction.run = original


def profile_torch(fn: Callable[[], object], settings: ProfileSettings, dest_root: Path, backend: str,
                  out_dir: Path | None = None, on_step: Callable[[int], None] | None = None) -> Path:
    """Run ``fn`` ``settings.steps`` times under torch.profiler; returns the new profile folder.

    The folder is created under ``dest_root`` (a staging folder: the caller renames it into
    ``out_dir``, so the name is chosen free in both).
    Each step ends with a device synchronize so the recorded kernels finish inside their step.
    """
    from torch.profiler import ProfilerActivity, profile, schedule

    from ascendopt.device import backends

    roots = [Path(dest_root)] + ([Path(out_dir)] if out_dir else [])
    folder = profile_folder(roots, settings.name, backend)
    folder.mkdir(parents=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if backend == "cuda" else [])
    traces: list[Path] = []

    def on_trace_ready(prof) -> None:
        # One trace per repeat cycle; the first keeps the agreed name trace.json.
        path = folder / ("trace.json" if not traces else f"trace_{len(traces)}.json")
        prof.export_chrome_trace(str(path))
        traces.append(path)

    sync = backends.Backend(backend, "collect").synchronize
    hook = name_interpreted_kernels() if backend == "cpu" else contextlib.nullcontext(None)
    # kineto's native lines and torch's per-cycle warning would break the progress line: kept off the terminal
    with hook as kernel_names, quiet_profiler():
        with profile(activities=activities, schedule=schedule(**settings.schedule), on_trace_ready=on_trace_ready,
                     record_shapes=True) as prof:
            for step in range(settings.steps):
                fn()
                sync()
                prof.step()
                if on_step:
                    on_step(step)
        names = set(kernel_names) if kernel_names else None
    kernel_table.write(traces, folder, backend, names)
    return folder
