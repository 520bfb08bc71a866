"""One profiling run on the current backend, metadata included (used in-process and by the child)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendopt.collect import metadata
from ascendopt.collect.metrics import LEVELS_WITHOUT_COUNTERS, NONE
from ascendopt.collect.settings import ProfileSettings


def recorded_group(settings: ProfileSettings, backend: str) -> str:
    """The metric group the folder really holds: Level0 on npu forces AiCoreNone (docs/profiler-formats.md §9.3)."""
    if backend == "npu" and settings.profiler_level in LEVELS_WITHOUT_COUNTERS:
        return NONE
    return settings.metric_group


def profile_into(fn: Callable[[], object], settings: ProfileSettings, dest_root: Path, *, out_dir: Path,
                 workload: dict[str, Any], command: str, set_id: str, git_dir: Path,
                 on_step: Callable[[int], None] | None = None) -> list[Path]:
    """Profile ``fn`` into ``dest_root`` (a staging folder) and write ``ascendopt_profile.yaml``.

    Returns the profile folders (npu: one ``*_ascend_pt`` per repeat cycle; cuda/cpu: one folder).
    ``hardware_counters`` is written False on cuda here; the Nsight Compute pass sets it.
    """
    from ascendopt.device import backends

    backend = backends.current().name
    if backend == "npu":
        from ascendopt.collect.npu import profile_npu

        folders = profile_npu(fn, settings, dest_root, on_step=on_step)
    else:
        from ascendopt.collect.torch_profiler import profile_torch

        folders = [profile_torch(fn, settings, dest_root, backend, out_dir=out_dir, on_step=on_step)]
    group = recorded_group(settings, backend)
    for folder in folders:
        data = metadata.build(backend=backend, settings=settings, workload=workload, command=command,
                              set_id=set_id, hardware_counters=(backend == "npu" and group != NONE),
                              git_dir=git_dir, extra={"metric_group": group})
        metadata.write(folder, data)
    return folders
