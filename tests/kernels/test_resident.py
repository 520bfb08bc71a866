"""CUDA residency grid (kernels.resident) and the memoized row plans (kernels.rowwise.row_plan)."""

from types import SimpleNamespace

import pytest

from ascendopt.device import backends
from ascendopt.kernels._lib import resident, rowwise
from ascendopt.kernels._lib.common import grid_size, num_cores

SM90 = (65536, 2048, 233472)


def _compiled(n_regs: int, warps: int = 4, shared: int = 1024):
    return SimpleNamespace(n_regs=n_regs, metadata=SimpleNamespace(num_warps=warps, shared=shared))


@pytest.mark.parametrize("n_regs, expected", [(32, 16), (40, 12), (56, 9), (80, 6), (127, 4), (128, 4), (168, 3),
                                              (255, 2)])
def test_residency_follows_registers(n_regs, expected):
    # sm_90 occupancy: 256-register allocation per warp, a quarter of 64K registers per scheduler.
    assert resident.resident_per_sm(_compiled(n_regs), SM90) == expected


def test_residency_limited_by_shared_memory_and_unknown_kernels():
    assert resident.resident_per_sm(_compiled(32, shared=100 * 1024), SM90) == 2
    assert resident.resident_per_sm(None, SM90) == 0  # the interpreter's launch returns no kernel
    assert resident.resident_per_sm(SimpleNamespace(n_regs=0, metadata=None), SM90) == 0


def test_grid_capped_only_once_residency_is_known(monkeypatch):
    monkeypatch.setattr(resident, "_per_sm", {})
    monkeypatch.setattr(resident, "_grids", {})
    kernel, variant = object(), ("bf16", 128, 64, False)
    default = grid_size("vector", 10_000)
    assert resident.programs(kernel, variant, 10_000, default) == default
    resident.learn(kernel, variant, _compiled(56))  # cpu backend: learns nothing
    assert resident.programs(kernel, variant, 10_000, default) == default
    resident._per_sm[(id(kernel), variant)] = 1
    cores = num_cores("vector")
    # One program per core fits at once: ceil(tasks / cores) rounds, shared out evenly.
    tasks = 5 * cores + 1
    grid = resident.programs(kernel, variant, tasks, grid_size("vector", tasks))
    assert grid == -(-tasks // 6) <= cores
    shares = [len(range(pid, tasks, grid)) for pid in range(grid)]
    assert max(shares) == 6 and min(shares) >= 5
    assert resident.programs(kernel, variant, 3, grid_size("vector", 3)) == min(3, cores)


def test_row_plan_is_memoized_per_device_facts():
    first = rowwise.row_plan(1000, 96, 3.0, 0.85)
    assert rowwise.row_plan(1000, 96, 3.0, 0.85) is first
    assert first.block_rows == rowwise.block_rows(1000, 96, 3.0, 0.85)
    assert sum(p.n_tasks * first.block_rows for p in first.launches if not p.tail) <= 1000
    backends.reset()  # new device facts: the plan is rebuilt, equal in content
    again = rowwise.row_plan(1000, 96, 3.0, 0.85)
    assert again is not first and again == first


def test_resident_cap_is_off_by_default_for_forward_grids_and_switchable(monkeypatch):
    monkeypatch.delenv("ASCENDOPT_CUDA_RESIDENT_GRID", raising=False)
    assert resident.enabled(default=False) is False and resident.enabled(default=True) is True
    monkeypatch.setenv("ASCENDOPT_CUDA_RESIDENT_GRID", "1")
    assert resident.enabled(default=False) is True
    monkeypatch.setenv("ASCENDOPT_CUDA_RESIDENT_GRID", "0")
    assert resident.enabled(default=True) is False


def test_streaming_row_kernels_get_one_program_per_task_on_cuda(monkeypatch):
    from types import SimpleNamespace

    from ascendopt.device import backends
    from ascendopt.kernels._lib import common

    monkeypatch.setattr(backends, "current", lambda: SimpleNamespace(name="cuda"))
    monkeypatch.setattr(common, "num_cores", lambda bound: 132)
    monkeypatch.delenv("ASCENDOPT_CUDA_PROGRAMS_PER_SM", raising=False)
    assert common.grid_size("vector", 10**6) == 132 * 16
    assert common.grid_size("vector", 10**6, streaming=True) == 10**6
    assert common.grid_size("vector", 0, streaming=True) == 1  # an empty launch still has a valid grid
    monkeypatch.setenv("ASCENDOPT_CUDA_PROGRAMS_PER_SM", "8")  # a sweep's override applies to both
    assert common.grid_size("vector", 10**6) == common.grid_size("vector", 10**6, streaming=True) == 132 * 8


def test_residency_of_a_kernel_compiled_but_not_launched_loads_its_binary_first():
    """``warmup`` returns a CompiledKernel whose binary is not loaded yet (module None, no register
    count): the residency rule loads it, as the first launch would, instead of answering 0."""

    class NotLoaded:
        module = None
        metadata = SimpleNamespace(num_warps=4, shared=1024)

        def _init_handles(self):
            self.module, self.n_regs = "loaded", 128

    assert resident.resident_per_sm(NotLoaded(), SM90) == 4
