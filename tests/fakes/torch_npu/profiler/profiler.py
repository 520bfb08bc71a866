"""Fake of ``torch_npu.profiler.profiler``: ``profile``, ``tensorboard_trace_handler``, ``analyse``.

The trace handler writes a ``{worker or host}_{pid}_{YYYYmmddHHMMSSmmm}_ascend_pt`` folder
(docs/profiler-formats.md §2): ``profiler_info.json`` (config as passed), ``profiler_metadata.json``,
``FRAMEWORK/``, ``PROF_*/device_0/{info.json.0, sample.json}`` and, when parsing runs (the
default ``analyse_flag=True``), ``ASCEND_PROFILER_OUTPUT/`` with REAL kernel_details /
op_statistic files copied from tests/data/ascend_fake_output (chosen by level and group) and
``analyse.done``. ``FAKE_TORCH_NPU_DEFER_ANALYSE=1`` makes the handler skip parsing, as an
export that did not finish; ``analyse()`` then writes the output.
"""

import json
import os
import shutil
import socket
import time
from datetime import datetime
from pathlib import Path

import torch_npu
from torch_npu.profiler._record import recorded
from torch_npu.profiler.experimental_config import AiCMetrics, ProfilerLevel, _ExperimentalConfig
from torch_npu.profiler.scheduler import ProfilerAction

DATA = Path(__file__).resolve().parents[3] / "data" / "ascend_fake_output"
OUTPUT = "ASCEND_PROFILER_OUTPUT"
_GROUP_OF_ACL = {v: k for k, v in vars(AiCMetrics).items() if not k.startswith("_")}


class ProfilerActivity:
    """Stands in for the C extension's ``torch_npu._C._profiler.ProfilerActivity`` (members CPU, NPU)."""

    class _Member:
        def __init__(self, name: str):
            self.name = name

        def __repr__(self) -> str:
            return f"ProfilerActivity.{self.name}"

    CPU = _Member("CPU")
    NPU = _Member("NPU")


def supported_activities():
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}


class profile:
    """Keyword-only signature of torch_npu 2.13.0 (§9.2); steps follow the schedule."""

    @recorded("profiler.profile")
    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, custom_trace_id_callback=None,
                 use_cuda=None):
        self.activities = activities or [ProfilerActivity.CPU, ProfilerActivity.NPU]
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes, self.with_modules = record_shapes, with_modules
        self.profile_memory, self.with_stack, self.with_flops = profile_memory, with_stack, with_flops
        self.experimental_config = experimental_config or _ExperimentalConfig()
        self.step_num = 0
        self.recorded_steps: list[int] = []
        self._action = ProfilerAction.RECORD

    def _action_at(self, step: int) -> ProfilerAction:
        return self.schedule(step) if self.schedule is not None else ProfilerAction.RECORD

    def start(self) -> None:
        torch_npu.CALLS.append(("profiler.profile.start", (), {}))
        self._action = self._action_at(0)

    def stop(self) -> None:
        torch_npu.CALLS.append(("profiler.profile.stop", (), {}))
        if self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self.recorded_steps.append(self.step_num)
            self._save()

    def step(self) -> None:
        torch_npu.CALLS.append(("profiler.profile.step", (), {}))
        previous = self._action
        if previous in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self.recorded_steps.append(self.step_num)
        self.step_num += 1
        self._action = self._action_at(self.step_num)
        if previous == ProfilerAction.RECORD_AND_SAVE:
            self._save()

    def _save(self) -> None:
        if self.on_trace_ready is not None and self.recorded_steps:
            self.on_trace_ready(self)
        self.recorded_steps = []

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        return False


@recorded("profiler.tensorboard_trace_handler")
def tensorboard_trace_handler(dir_name: str | None = None, worker_name: str | None = None,
                              analyse_flag: bool = True, async_mode: bool = False):
    def handler(prof: profile) -> None:
        torch_npu.CALLS.append(("profiler.trace_ready", (), {"steps": list(prof.recorded_steps)}))
        stamp = datetime.now().strftime("%Y%m%d%H%M%S%f")[:-3]
        run = Path(dir_name or ".") / f"{worker_name or socket.gethostname()}_{os.getpid()}_{stamp}_ascend_pt"
        while run.exists():  # two traces within one millisecond
            time.sleep(0.002)
            stamp = datetime.now().strftime("%Y%m%d%H%M%S%f")[:-3]
            run = run.with_name(f"{worker_name or socket.gethostname()}_{os.getpid()}_{stamp}_ascend_pt")
        _write_raw(run, prof)
        if analyse_flag and os.environ.get("FAKE_TORCH_NPU_DEFER_ANALYSE") != "1":
            _write_output(run)

    return handler


@recorded("profiler.analyse")
def analyse(profiler_path: str, max_process_number: int = max(1, (os.cpu_count() or 2) // 2),
            export_type: str | list | None = None):
    root = Path(profiler_path)
    runs = [root] if root.name.endswith("_ascend_pt") else sorted(root.glob("*_ascend_pt"))
    for run in runs:
        if not (run / OUTPUT / "analyse.done").exists():
            _write_output(run)


def _write_raw(run: Path, prof: profile) -> None:
    """The raw part of a run: config, metadata, FRAMEWORK/, PROF_*/device_0 facts (§2, §3 key names)."""
    cfg = prof.experimental_config
    run.mkdir(parents=True)
    info = {
        "config": {
            "common_config": {
                "activities": [repr(a) for a in prof.activities],
                "schedule": prof.schedule.to_dict() if prof.schedule is not None else None,
                "record_shapes": prof.record_shapes, "profile_memory": prof.profile_memory,
                "with_stack": prof.with_stack, "with_flops": prof.with_flops, "with_modules": prof.with_modules,
            },
            "experimental_config": cfg.to_dict(),
        },
        "recorded_steps": list(prof.recorded_steps),
        "rank_id": -1,
        "torch_npu_version": torch_npu.__version__,
    }
    (run / "profiler_info.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    (run / "profiler_metadata.json").write_text(json.dumps({"ENV_VARIABLES": {}}), encoding="utf-8")
    (run / "FRAMEWORK").mkdir()
    props = torch_npu.get_device_properties(0)
    device = run / f"PROF_000001_{datetime.now().strftime('%Y%m%d%H%M%S%f')[:17]}_FAKEFAKEFAKEFAKE" / "device_0"
    device.mkdir(parents=True)
    facts = {"platform_version": "5", "DeviceInfo": [{"id": 0, "ai_core_num": props.cube_core_num,
                                                      "aiv_num": props.vector_core_num, "aic_frequency": "1800",
                                                      "aiv_frequency": "1800", "hwts_frequency": "50"}]}
    (device / "info.json.0").write_text(json.dumps(facts), encoding="utf-8")
    group = _GROUP_OF_ACL.get(cfg._aic_metrics, "AiCoreNone")
    sample = {"ai_core_metrics": group, "aiv_metrics": group, "ai_core_profiling_mode": "task-based"}
    (device / "sample.json").write_text(json.dumps(sample), encoding="utf-8")


def _fixture_for(level: str, acl_metrics: str) -> str:
    if level in (ProfilerLevel.Level0, ProfilerLevel.Level_none) or acl_metrics == AiCMetrics.AiCoreNone:
        return "level0_cnn"
    return {AiCMetrics.PipeUtilization: "level1_cnn", AiCMetrics.MemoryL0: "memory_l0"}.get(acl_metrics, "level0_cnn")


def _write_output(run: Path) -> None:
    """ASCEND_PROFILER_OUTPUT/ with real CSVs (byte-exact copies) and analyse.done."""
    experimental = json.loads((run / "profiler_info.json").read_text())["config"]["experimental_config"]
    source = DATA / _fixture_for(experimental["_profiler_level"], experimental["_aic_metrics"])
    out = run / OUTPUT
    out.mkdir(exist_ok=True)
    for csv in sorted(source.glob("*.csv")):
        shutil.copyfile(csv, out / csv.name)
    (out / "analyse.done").write_text("", encoding="utf-8")
