"""The npu collector against the fake torch_npu (tests/fakes/torch_npu, real signatures of
torch_npu 2.13.0): the exact profiler call sequence, the offline analyse() fallback, Level0, and a
folder that the real profile reader loads."""

import hashlib
import inspect
import os
import re
from pathlib import Path

import pytest
import yaml

TESTS = Path(__file__).resolve().parents[1]
FAKE_OUTPUT = TESTS / "data" / "ascend_fake_output"


@pytest.fixture
def npu(fake_torch_npu, monkeypatch):
    monkeypatch.setenv("ASCENDOPT_BACKEND", "npu")
    import torch_npu

    torch_npu.CALLS.clear()
    return torch_npu


def _profiler_calls(calls):
    return [c for c in calls if c[0].startswith("profiler.") or c[0] == "synchronize"]


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_fake_mirrors_the_real_signatures(npu):
    from torch_npu import profiler
    from torch_npu.profiler.profiler import analyse

    assert str(inspect.signature(profiler.profile)) == (
        "(*, activities=None, schedule=None, on_trace_ready=None, record_shapes=False, profile_memory=False, "
        "with_stack=False, with_flops=False, with_modules=False, experimental_config=None, "
        "execution_trace_observer=None, custom_trace_id_callback=None, use_cuda=None)")
    assert str(inspect.signature(profiler.schedule)) == (
        "(wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0, skip_first_wait: int = 0)")
    assert list(inspect.signature(profiler.tensorboard_trace_handler).parameters) == [
        "dir_name", "worker_name", "analyse_flag", "async_mode"]
    assert list(inspect.signature(profiler._ExperimentalConfig).parameters) == [
        "profiler_level", "aic_metrics", "l2_cache", "msprof_tx", "mstx", "data_simplification", "record_op_args",
        "op_attr", "gc_detect_threshold", "export_type", "host_sys", "mstx_domain_include", "mstx_domain_exclude",
        "sys_io", "sys_interconnection"]
    assert list(inspect.signature(analyse).parameters) == ["profiler_path", "max_process_number", "export_type"]
    assert not hasattr(profiler, "analyse")  # not re-exported, as in the real package


def test_npu_call_sequence_is_exact(npu, tmp_path):
    import torch

    from ascendopt.collect import profile_callable

    calls_seen = []
    folder = profile_callable(lambda: calls_seen.append(torch.ones(2)), name="my_op", out_dir=tmp_path / "prof")
    from torch_npu.profiler import AiCMetrics, ExportType, ProfilerActivity, ProfilerLevel

    seq = _profiler_calls(npu.CALLS)
    names = [c[0] for c in seq]
    assert names == ["profiler._ExperimentalConfig", "profiler.schedule", "profiler.tensorboard_trace_handler",
                     "profiler.profile", "profiler.profile.start",
                     "synchronize", "profiler.profile.step", "synchronize", "profiler.profile.step",
                     "profiler.trace_ready", "profiler.profile.stop"]
    assert seq[0][1:] == ((), {"profiler_level": ProfilerLevel.Level1, "aic_metrics": AiCMetrics.PipeUtilization,
                               "export_type": ExportType.Text})
    assert seq[1][1:] == ((), {"wait": 0, "active": 1, "warmup": 1, "repeat": 1, "skip_first": 0})
    (handler_dir,), handler_kwargs = seq[2][1], seq[2][2]
    assert handler_kwargs == {}
    staging = Path(handler_dir).parent  # the run's own folder inside the set's staging folder
    assert staging.parent == (tmp_path / "prof").resolve() and staging.name.startswith(".ascendopt-staging-")
    assert not staging.exists()
    kwargs = seq[3][2]
    assert seq[3][1] == ()
    assert set(kwargs) == {"activities", "schedule", "on_trace_ready", "record_shapes", "with_modules",
                           "experimental_config"}
    assert kwargs["activities"] == [ProfilerActivity.CPU, ProfilerActivity.NPU]
    assert kwargs["record_shapes"] is True and kwargs["with_modules"] is True
    assert kwargs["schedule"].to_dict() == {"wait": 0, "active": 1, "warmup": 1, "repeat": 1, "skip_first": 0}
    assert kwargs["experimental_config"]._aic_metrics == "ACL_AICORE_PIPE_UTILIZATION"
    assert seq[9][2] == {"steps": [1]}  # the warmup step 0 is not recorded, step 1 is
    assert len(calls_seen) == 2
    assert not any(c[0] == "profiler.analyse" for c in npu.CALLS)  # export finished: no offline parse

    assert re.fullmatch(r".+_\d+_\d{17}_ascend_pt", folder.name) and folder.parent == (tmp_path / "prof").resolve()
    out = folder / "ASCEND_PROFILER_OUTPUT"
    assert _sha(out / "kernel_details.csv") == _sha(FAKE_OUTPUT / "level1_cnn" / "kernel_details.csv")
    assert [p.name for p in (tmp_path / "prof").iterdir()] == [folder.name]  # no staging left
    meta = yaml.safe_load((folder / "ascendopt_profile.yaml").read_text())
    assert meta["schema"] == 1 and meta["backend"] == "npu" and meta["metric_group"] == "PipeUtilization"
    assert meta["hardware_counters"] is True and meta["name"] == "my_op"
    assert meta["device"]["name"] == "Ascend910B2" and meta["device"]["vector_cores"] == 48
    assert meta["workload"]["kind"] == "callable" and meta["set_id"]
    assert meta["profiler"] == {"level": "Level1", "steps": 2,
                                "schedule": {"wait": 0, "warmup": 1, "active": 1, "repeat": 1, "skip_first": 0}}


def test_unfinished_export_runs_offline_analyse(npu, tmp_path, monkeypatch):
    from ascendopt.collect import profile_callable

    monkeypatch.setenv("FAKE_TORCH_NPU_DEFER_ANALYSE", "1")
    folder = profile_callable(lambda: None, name="op", out_dir=tmp_path, aic_metrics="memoryl0", wait=1, warmup=1,
                              active=2, skip_first=1)
    seq = _profiler_calls(npu.CALLS)
    assert seq[0][2]["aic_metrics"] == "ACL_AICORE_L0B_AND_WIDTH"
    assert seq[1][2] == {"wait": 1, "active": 2, "warmup": 1, "repeat": 1, "skip_first": 1}
    assert [c[0] for c in seq].count("profiler.profile.step") == 5  # skip_first + wait + warmup + active
    assert next(c for c in seq if c[0] == "profiler.trace_ready")[2] == {"steps": [3, 4]}
    analyse_calls = [c for c in seq if c[0] == "profiler.analyse"]
    assert len(analyse_calls) == 1 and analyse_calls[0][1] == ()
    assert Path(analyse_calls[0][2]["profiler_path"]).name == folder.name
    assert _sha(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv") == _sha(
        FAKE_OUTPUT / "memory_l0" / "kernel_details.csv")
    assert (folder / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()


def test_level0_collects_no_counters(npu, tmp_path):
    from ascendopt.collect import profile_callable

    folder = profile_callable(lambda: None, name="op", out_dir=tmp_path, aic_metrics="ub", profiler_level="level0")
    cfg = _profiler_calls(npu.CALLS)[0]
    assert cfg[2] == {"profiler_level": "Level0", "aic_metrics": "ACL_AICORE_NONE", "export_type": "text"}
    meta = yaml.safe_load((folder / "ascendopt_profile.yaml").read_text())
    assert meta["metric_group"] == "none" and meta["hardware_counters"] is False


def test_npu_folder_is_read_by_the_profile_reader(npu, tmp_path):
    from ascendopt.analyze.traces import load_profile
    from ascendopt.collect import profile_callable

    folder = profile_callable(lambda: None, name="op", out_dir=tmp_path, aic_metrics="pipe")
    profile = load_profile(folder)
    assert profile.kind == "npu" and "PipeUtilization" in profile.metric_groups
    assert len(profile.kernels) == 191 and profile.set_id


def test_npu_exec_file_through_the_child_process(npu, cli, tmp_path, monkeypatch):
    """`ascendopt --backend npu collect --exec-file`: the workload's child process imports the fake too."""
    workload = tmp_path / "wl.py"
    workload.write_text("import torch\nx = torch.ones(4)\n\ndef workload():\n    return x + 1\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS / "fakes"), os.environ.get("PYTHONPATH", "")]))
    code, out, err = cli("--backend", "npu", "collect", "--exec-file", str(workload), "--aic-metrics", "pipe,memory",
                         "--out-dir", str(tmp_path / "out"))
    assert code == 0, err
    paths = [Path(p) for p in out.split()]
    assert len(paths) == 2 and all(p.name.endswith("_ascend_pt") for p in paths)
    metas = [yaml.safe_load((p / "ascendopt_profile.yaml").read_text()) for p in paths]
    assert [m["metric_group"] for m in metas] == ["PipeUtilization", "Memory"]
    assert metas[0]["set_id"] == metas[1]["set_id"]
    assert metas[0]["workload"]["identity"] == "sha256:" + _sha(workload)
    assert metas[0]["command"].startswith("ascendopt collect --exec-file ")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in paths)
