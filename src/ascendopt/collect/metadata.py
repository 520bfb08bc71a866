"""``ascendopt_profile.yaml``: what a profile folder holds, so analyze/reprofile can pair runs.

Schema 1 (agreed interface): ``backend, device, metric_group, workload {kind, identity, ...},
command, created_at, git_commit, hardware_counters, set_id, name`` plus the run's ``profiler``
settings. ``workload.identity`` is what pairs runs: ``sha256:<hex>`` of an exec-file, or
``kernel=<name>;shape=<preset or dims>;dtype=<dt>;mode=<mode>`` for a bundled kernel (the
tunable config is recorded beside it but is not part of the identity, because a round compares
the same workload under two configs).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ascendopt.workspace import read_yaml, sha256_file, write_yaml

FILENAME = "ascendopt_profile.yaml"


def git_commit(where: Path) -> str | None:
    """HEAD of the git checkout holding ``where``; None outside a checkout or without git."""
    from ascendopt.process import git

    return git("rev-parse", "HEAD", cwd=where) or None


def exec_file_workload(path: Path) -> dict[str, Any]:
    return {"kind": "exec-file", "identity": f"sha256:{sha256_file(path)}", "path": str(Path(path).resolve())}


def kernel_workload(kernel: str, shape: str, dims: dict[str, Any], dtype: str, mode: str,
                    config: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "kernel", "identity": f"kernel={kernel};shape={shape};dtype={dtype};mode={mode}",
            "kernel": kernel, "shape": shape, "dims": {k: (list(v) if isinstance(v, tuple) else v)
                                                       for k, v in dims.items()},
            "dtype": dtype, "mode": mode, "config": dict(config)}


def callable_workload(fn: Any) -> dict[str, Any]:
    """A Python callable handed to ``profile_callable``: identified by its qualified name only."""
    qualname = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    return {"kind": "callable", "identity": f"callable={qualname}"}


def device_facts(backend_name: str) -> dict[str, Any]:
    """The device as the backend sees it (same facts as ``ascendopt env``); ``chip`` is None off NPU."""
    from ascendopt.device import backends

    info = backends.current().info()
    facts = {"name": info.name, "torch_device": info.device, "chip": info.chip, "cube_cores": info.cube_cores,
             "vector_cores": info.vector_cores, "cores_source": info.cores_source, "ub_bytes": info.ub_bytes,
             "source": f"ascendopt backends ({backend_name})"}
    if backend_name != "npu":
        # Off NPU the chip is only the model used for UB predictions, not this device: say so, so
        # that readers do not take the model chip's core counts for the device's.
        facts["model_chip"] = facts.pop("chip")
        facts["chip"] = None
    return facts


def build(*, backend: str, settings: Any, workload: dict[str, Any], command: str, set_id: str,
          hardware_counters: bool, git_dir: Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    from ascendopt import __version__

    data: dict[str, Any] = {
        "name": settings.name,
        "backend": backend,
        "device": device_facts(backend),
        "metric_group": settings.metric_group,
        "hardware_counters": bool(hardware_counters),
        "workload": workload,
        "command": command,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git_commit": git_commit(git_dir),
        "set_id": set_id,
        "profiler": {"level": settings.profiler_level, "schedule": settings.schedule, "steps": settings.steps},
        "ascendopt_version": __version__,
    }
    data.update(extra or {})
    return data


def write(folder: Path, data: dict[str, Any]) -> Path:
    path = Path(folder) / FILENAME
    write_yaml(path, data)
    os.chmod(path, 0o644)  # the atomic writer's temp file is private; profiles are shared artefacts
    return path


def update(folder: Path, **fields: Any) -> None:
    path = Path(folder) / FILENAME
    data = read_yaml(path)
    data.update(fields)
    write(folder, data)
