"""Numbers that cannot mislead (issue 41, item 4): on a cpu profile analyze claims no chip's core counts,
lists no metric group nobody could request as "not collected", and prints a lever paragraph once; a
profile's calls are its distinct step ids, what a per-call device time divides by."""

import yaml

from _cli_json import json_payload
from ascendopt.analyze.diagnosis import analyze, profiled_calls
from ascendopt.analyze.traces import load_profile

# the ascendopt_profile.yaml of a cpu collect: the interpreter's grid (configs/chips.yaml) under device
CPU_META = {"schema": 1, "name": "baseline", "backend": "cpu", "metric_group": "PipeUtilization",
            "hardware_counters": False,
            "device": {"name": "cpu (Triton interpreter)", "torch_device": "cpu", "cube_cores": 2, "vector_cores": 4,
                       "cores_source": "configs/chips.yaml (interpreter)", "chip": None}}


def _cpu_profile(folder, rows):
    folder.mkdir()
    (folder / "ascendopt_profile.yaml").write_text(yaml.safe_dump(CPU_META), encoding="utf-8")
    lines = ["name,core_type,start_us,duration_us,step,device"]
    lines += [f"{name},{core},{start},{dur},{step},cpu" for name, core, start, dur, step in rows]
    (folder / "kernels.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _two_kernels(tmp_path):
    # two profiled calls (steps 1 and 2), each: one aten::empty and two launches of the Triton kernel
    rows = []
    for step in (1, 2):
        t = 1000.0 * step
        rows += [("aten::empty", "torch_op", t, 2.0, step), ("_k_fwd_kernel", "cpu", t + 10, 300.0, step),
                 ("_k_fwd_kernel", "cpu", t + 400, 100.0, step)]
    return _cpu_profile(tmp_path / "run_ascendopt_cpu", rows)


def _analyze_text(tmp_path, cli):
    code, out, err = cli("analyze", str(_two_kernels(tmp_path)))
    assert code == 0, out + err
    return out


def test_cpu_analyze_claims_no_core_counts(tmp_path, cli):
    device = next(line for line in _analyze_text(tmp_path, cli).splitlines() if line.startswith("device:"))
    assert "cube cores" not in device and "vector cores" not in device and "no accelerator cores" in device


def test_cpu_analyze_lists_no_group_never_requested_as_not_collected(tmp_path, cli):
    groups = next(line for line in _analyze_text(tmp_path, cli).splitlines() if line.startswith("metric groups:"))
    assert "not collected" not in groups and "PipeUtilization" not in groups and "Memory" not in groups


def test_cpu_analyze_prints_a_lever_paragraph_once(tmp_path, cli):
    out = _analyze_text(tmp_path, cli)
    lever = "the CPU backend (Triton interpreter) has no hardware counters"
    assert out.count(lever) == 1, out  # printed for the first kernel; the other points to it
    assert "  lever [no_counters]: as for _k_fwd_kernel above" in out.splitlines()


def test_cpu_profile_holds_no_interpreter_grid_as_device_cores(tmp_path):
    profile = load_profile(_two_kernels(tmp_path))
    assert profile.device["cube_cores"] is None and profile.device["vector_cores"] is None
    assert profile.metric_groups == [] and profile.not_collected == []


def test_profiled_calls_are_the_distinct_steps(tmp_path, cli):
    folder = _two_kernels(tmp_path)
    code, out, err = cli("analyze", str(folder), "--json")
    assert code == 0 and json_payload(out)["profiled_calls"] == 2, out + err  # validated against the schema
    profile = load_profile(folder)
    assert profiled_calls(profile) == 2
    report = analyze(profile)
    assert report["profiled_calls"] == 2
    kernel = next(k for k in report["kernels"] if k["name"] == "_k_fwd_kernel")
    assert (kernel["count"], kernel["total_us"]) == (4, 800.0)  # per call: 2 launches, 400 us
    profile.kernels["step"] = float("nan")  # a table without step ids: the calls are unknown, never guessed
    assert profiled_calls(profile) is None
    # without step ids, an ascendopt collect's schedule says how many calls it recorded (active x repeat)
    meta = dict(CPU_META, profiler={"schedule": {"wait": 0, "warmup": 1, "active": 3, "repeat": 1}})
    (folder / "ascendopt_profile.yaml").write_text(yaml.safe_dump(meta), encoding="utf-8")
    scheduled = load_profile(folder)
    scheduled.kernels["step"] = float("nan")
    assert profiled_calls(scheduled) == 3


def test_cpu_runs_merged_list_no_group_as_not_collected(tmp_path):
    from ascendopt.analyze.traces import load_profiles

    runs = []
    for name in ("a", "b"):  # two runs of the same work, merged as metric-group runs are
        (tmp_path / name).mkdir()
        runs.append(_two_kernels(tmp_path / name))
    assert load_profiles(runs).not_collected == []
