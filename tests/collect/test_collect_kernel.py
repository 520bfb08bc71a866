"""`collect --kernel` / ``collect_kernel`` with a test-only bundled kernel (registered by
monkeypatching the registry): a real Triton kernel in the interpreter, launched through
``kernels.common.launch`` so the CPU profile shows it as a named range."""

from pathlib import Path

import pandas as pd
import pytest
import torch
import triton
import triton.language as tl
import yaml

from _cli_json import json_payload
from ascendopt import kernels
from ascendopt.kernels._lib.common import alloc, grid_size, launch
from ascendopt.kernels.spec import Cost, KernelSpec, ShapePreset, Tunable


@triton.jit
def _t_double_kernel(x_ptr, y_ptr, n, tasks, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for task in range(pid, tasks, tl.num_programs(0)):
        offs = tl.cast(task, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def _run(inputs, config, mode):
    x = inputs["x"]
    y = alloc(x.shape, x.dtype, x.device)
    tasks = triton.cdiv(x.numel(), config["BLOCK"])
    launch(_t_double_kernel, (grid_size("vector", tasks),), x, y, x.numel(), tasks, BLOCK=config["BLOCK"])
    return {"y": y}


SPEC = KernelSpec(
    name="t_double", description="y = 2 x (test only)", bound="vector", modes=("fwd",), dtypes=("fp32",),
    shapes={"tiny": ShapePreset("tiny", {"N": 96}), "realistic": ShapePreset("realistic", {"N": 1 << 20})},
    tunables={"BLOCK": Tunable("BLOCK", 32, (16, 32, 64), "elements per task")},
    make_inputs=lambda dims, dtype, device, seed: {
        "x": torch.randn(dims["N"], generator=torch.Generator().manual_seed(seed)).to(device)},
    run=_run, reference=lambda inputs, mode: {"y": inputs["x"].float() * 2},
    ub_model=lambda dims, config, dtype: [], cost=lambda dims, dtype, mode: Cost(8 * dims["N"], dims["N"]),
    supports=lambda dims, dtype, mode: None if dims.get("N", 0) > 0 else "N must be positive",
    kernel_names=("_t_double_kernel",), tolerances={"fp32": 1e-6},
)


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(kernels, "_registry", {"t_double": SPEC})


def test_collect_kernel_cli_json(registry, cli, tmp_path):
    code, out, err = cli("collect", "--kernel", "t_double", "--shape", "N=80", "--set", "BLOCK=16", "--aic-metrics",
                         "pipe", "--out-dir", str(tmp_path / "prof"), "--json")
    assert code == 0, err
    data = json_payload(out)
    (profile,) = data["profiles"]
    assert data["backend"] == "cpu" and profile["metric_group"] == "PipeUtilization"
    assert profile["hardware_counters"] is False and profile["set_id"]
    folder = Path(profile["path"])
    meta = yaml.safe_load((folder / "ascendopt_profile.yaml").read_text())
    assert meta["workload"] == {"kind": "kernel", "identity": "kernel=t_double;shape=N=80;dtype=fp32;mode=fwd",
                                "kernel": "t_double", "shape": "N=80", "dims": {"N": 80}, "dtype": "fp32",
                                "mode": "fwd", "config": {"BLOCK": 16}}
    assert meta["command"] == ("ascendopt collect --kernel t_double --shapes N=80 --set BLOCK=16 --aic-metrics pipe "
                               "--level Level1 --out-dir " + str(tmp_path / "prof") +
                               " --wait 0 --warmup 1 --active 1 --repeat 1 --skip-first 0")
    table = pd.read_csv(folder / "kernels.csv")
    launches = table[table["name"] == "_t_double_kernel"]
    # one launch in the single active step: the launch() range and the interpreter hook count once
    assert len(launches) == 1 and launches.iloc[0]["step"] == 1


def test_collect_kernel_api_one_folder_per_group(registry, tmp_path):
    from ascendopt.collect import collect_kernel

    paths = collect_kernel("t_double", shape="tiny", dtype="fp32", mode="fwd", config=None,
                           metric_groups=["ub", "l2"], out_dir=tmp_path)
    metas = [yaml.safe_load((p / "ascendopt_profile.yaml").read_text()) for p in paths]
    assert [m["metric_group"] for m in metas] == ["MemoryUB", "L2Cache"]
    assert len({m["set_id"] for m in metas}) == 1 and len({p.name for p in paths}) == 2
    assert metas[0]["workload"]["dims"] == {"N": 96} and metas[0]["workload"]["config"] == {"BLOCK": 32}


@pytest.mark.parametrize(
    "kwargs, message",
    [({"shape": "huge"}, "has no shape preset 'huge'"), ({"dtype": "bf16"}, "does not support dtype 'bf16'"),
     ({"mode": "fwdbwd"}, "does not support mode 'fwdbwd'"), ({"config": {"BLOCK": 7}}, "BLOCK=7: out of range"),
     ({"shape": "N=0"}, "N must be positive"), ({"metric_groups": ["pipe", "nope"]}, "unknown metric group 'nope'")],
)
def test_collect_kernel_rejects_bad_cases_before_running(registry, tmp_path, kwargs, message):
    from ascendopt.collect import collect_kernel
    from ascendopt.errors import UsageError

    with pytest.raises(UsageError, match=message):
        collect_kernel("t_double", out_dir=tmp_path / "prof", **kwargs)
    assert not (tmp_path / "prof").exists() or list((tmp_path / "prof").iterdir()) == []


def test_profile_callable_on_cpu(tmp_path):
    from ascendopt import profile_callable

    x = torch.randn(64)
    folder = profile_callable(lambda: (x * 3).sum(), name="lib op", out_dir=tmp_path / "p", aic_metrics="arith",
                              warmup=2, active=1)
    assert folder.parent == (tmp_path / "p").resolve() and folder.name.startswith("lib_op_")
    meta = yaml.safe_load((folder / "ascendopt_profile.yaml").read_text())
    assert meta["metric_group"] == "ArithmeticUtilization" and meta["hardware_counters"] is False
    assert meta["workload"]["kind"] == "callable" and meta["profiler"]["steps"] == 3
    table = pd.read_csv(folder / "kernels.csv")
    # no Triton kernel ran: the torch ops of the one active step (step 2) are the table
    assert set(table["core_type"]) == {"torch_op"} and set(table["step"]) == {2}
    assert {"aten::mul", "aten::sum"} <= set(table["name"])
    from ascendopt.errors import UsageError

    with pytest.raises(UsageError, match="unknown metric group"):
        profile_callable(lambda: None, name="x", out_dir=tmp_path / "q", aic_metrics="pipes")
    assert not (tmp_path / "q").exists()


def test_profile_callable_keeps_user_ranges_after_an_earlier_triton_run(tmp_path):
    """The interpreter hook's kernel names belong to one profiling run: a later run without Triton
    kernels keeps the user's record_function ranges (a process-wide name set used to drop them)."""
    from ascendopt import profile_callable

    x = torch.randn(96)
    first = profile_callable(lambda: _run({"x": x}, {"BLOCK": 32}, "fwd"), name="triton run",
                             out_dir=tmp_path / "a")
    assert "_t_double_kernel" in set(pd.read_csv(first / "kernels.csv")["name"])

    def user_code():
        with torch.profiler.record_function("user_block"):
            (x * 3).sum()

    second = profile_callable(user_code, name="user run", out_dir=tmp_path / "b")
    table = pd.read_csv(second / "kernels.csv")
    assert "user_block" in set(table.loc[table["core_type"] == "cpu", "name"])
    assert "_t_double_kernel" not in set(table["name"])
