import os

import pytest

from ascendopt.device import backends
from ascendopt.errors import EnvironmentProblem, ExitCode, UsageError


def test_cpu_backend_reports_interpreter_and_model_chip():
    b = backends.detect("cpu")
    info = b.info()
    assert b.name == "cpu" and info.device == "cpu"
    assert info.ub_enforced is False
    assert info.ub_bytes == 196608  # Ascend910B2, the default model chip
    assert info.vector_cores >= info.cube_cores >= 1


def test_explicit_npu_without_torch_npu_is_environment_error(monkeypatch):
    monkeypatch.setattr(backends.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EnvironmentProblem) as exc:
        backends.detect("npu")
    assert exc.value.exit_code == ExitCode.ENVIRONMENT
    assert "torch_npu is not installed" in str(exc.value)


def test_unknown_backend_lists_known():
    with pytest.raises(UsageError, match="known backends: npu, cuda, cpu"):
        backends.detect("tpu")


def test_auto_detection_skips_npu_and_cuda_with_reasons(monkeypatch):
    monkeypatch.delenv("ASCENDOPT_BACKEND", raising=False)
    b = backends.detect(None)
    assert b.name == "cpu"
    assert "npu:" in b.reason and "cuda:" in b.reason


def test_fake_torch_npu_detected_with_core_counts_from_device_properties(fake_torch_npu, monkeypatch):
    monkeypatch.setenv("FAKE_TORCH_NPU_CHIP", "Ascend910B3")
    b = backends.detect("npu")
    info = b.info()
    assert (info.name, info.cube_cores, info.vector_cores) == ("Ascend910B3", 20, 40)
    assert info.cores_source == "torch.npu.get_device_properties"
    assert info.ub_enforced and info.ub_bytes == 196608
    assert info.cores_for("cube") == 20 and info.cores_for("vector") == 40


def test_fake_torch_npu_without_cann_gives_reason_not_crash(fake_torch_npu, monkeypatch):
    monkeypatch.setenv("FAKE_TORCH_NPU_MISSING_CANN", "1")
    reason = backends.probe("npu")
    assert reason is not None and "libhccl.so" in reason and "set_env.sh" in reason


def test_ub_override_must_be_positive(monkeypatch):
    monkeypatch.setenv("ASCENDOPT_UB_BYTES", "abc")
    with pytest.raises(UsageError, match="ASCENDOPT_UB_BYTES"):
        backends.detect("cpu").info()


def test_prepare_kernels_sets_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if backends.jit_modules_loaded():
        with pytest.raises(EnvironmentProblem, match="TRITON_INTERPRET=1"):
            backends.Backend("cpu", "test").prepare_kernels()
    else:
        backends.Backend("cpu", "test").prepare_kernels()
        assert os.environ["TRITON_INTERPRET"] == "1"


def test_cpu_timer_measures_elapsed_ms():
    import time

    t = backends.Backend("cpu", "test").timer()
    t.start()
    time.sleep(0.01)
    ms = t.stop()
    assert 9.0 <= ms < 200.0


def test_bad_model_chip_names_the_variable(monkeypatch):
    monkeypatch.setenv("ASCENDOPT_CHIP", "bogus")
    with pytest.raises(UsageError, match=r"ASCENDOPT_CHIP='bogus': unknown chip"):
        backends.detect("cpu").info()
    backends.reset()
    monkeypatch.setenv("ASCENDOPT_CHIP", "NVIDIA H200")
    with pytest.raises(UsageError, match=r"ASCENDOPT_CHIP='NVIDIA H200': no UB size"):
        backends.detect("cpu").info()


def test_select_records_the_choice_and_child_env_passes_it_on(monkeypatch):
    monkeypatch.delenv("ASCENDOPT_BACKEND", raising=False)
    backends.select("cpu")
    assert "ASCENDOPT_BACKEND" not in os.environ  # the choice is this process's, not its environment's
    assert backends.chosen() == "cpu" and backends.current().name == "cpu"
    env = backends.child_env({"PATH": "/bin"})
    assert env == {"PATH": "/bin", "ASCENDOPT_BACKEND": "cpu"}  # a child process receives it explicitly
    backends.select(None)
    assert backends.chosen() is None and "ASCENDOPT_BACKEND" not in backends.child_env()
    with pytest.raises(UsageError, match="known backends"):
        backends.select("tpu")


def test_without_a_selection_the_environment_choice_passes_on_unchanged(monkeypatch):
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    assert backends.chosen() == "cpu" and backends.child_env()["ASCENDOPT_BACKEND"] == "cpu"
