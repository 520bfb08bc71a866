"""`ascendopt collect` on the cpu backend: a real tiny Triton workload in a child process under the
real torch.profiler, every bad-workload case, and a bundled-kernel collection."""

import os
import textwrap
import time

import pandas as pd
import pytest
import yaml

from _cli_json import json_payload

TRITON_WORKLOAD = textwrap.dedent("""\
    import torch
    import triton
    import triton.language as tl

    from helper_mod import SCALE  # the file's folder is on sys.path


    @triton.jit
    def _scale_add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.cast(pid, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE + 1.0, mask=mask)


    x = torch.randn(128)
    y = torch.empty_like(x)
    CALLS = []


    def workload():
        CALLS.append(1)
        _scale_add_kernel[(2,)](x, y, x.numel(), BLOCK=64)
        assert torch.allclose(y, x * SCALE + 1.0)
""")


def _write(tmp_path, source, name="wl.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def _one_line(err):
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_exec_file_triton_workload_two_metric_groups(cli, tmp_path):
    (tmp_path / "helper_mod.py").write_text("SCALE = 2.0\n")
    wl = _write(tmp_path, TRITON_WORKLOAD, "tiny_triton.py")
    out_dir = tmp_path / "prof"
    code, out, err = cli("collect", "--exec-file", str(wl), "--aic-metrics", "pipe,UB", "--out-dir", str(out_dir),
                         "--name", "../evil name;rm", "--analyze", "--json")
    assert code == 0, err
    paths = sorted(out_dir.iterdir())  # exactly the two runs: no staging folder left
    assert len(paths) == 2
    report = json_payload(out)  # --analyze --json: the analyze report of the merged set
    assert report["schema"] == 1 and "_scale_add_kernel" in [k["name"] for k in report["kernels"]]
    for p in paths:
        assert p.parent == out_dir.resolve()
        assert p.name.startswith("evil_name_rm_") and p.name.endswith("_ascendopt_cpu")
        assert {f.name for f in p.iterdir()} == {"ascendopt_profile.yaml", "trace.json", "kernels.csv"}
    metas = [yaml.safe_load((p / "ascendopt_profile.yaml").read_text()) for p in paths]
    assert [m["metric_group"] for m in metas] == ["PipeUtilization", "MemoryUB"]
    assert metas[0]["set_id"] == metas[1]["set_id"]
    for m in metas:
        assert m["schema"] == 1 and m["backend"] == "cpu" and m["hardware_counters"] is False
        assert m["name"] == "evil_name_rm" and m["workload"]["kind"] == "exec-file"
        assert m["workload"]["identity"].startswith("sha256:") and len(m["workload"]["identity"]) == 7 + 64
        assert m["command"].startswith("ascendopt collect --exec-file ") and "--aic-metrics pipe,UB" in m["command"]
        assert m["git_commit"] is None or len(m["git_commit"]) == 40
        assert m["device"]["torch_device"] == "cpu" and m["device"]["chip"] is None
    table = pd.read_csv(paths[0] / "kernels.csv")
    assert list(table.columns) == ["name", "core_type", "start_us", "duration_us", "step", "device"]
    kernel_rows = table[table["name"] == "_scale_add_kernel"]
    # warmup step 0 is not recorded; the one active step has exactly one launch
    assert len(kernel_rows) == 1 and kernel_rows.iloc[0]["core_type"] == "cpu" and kernel_rows.iloc[0]["step"] == 1
    assert kernel_rows.iloc[0]["duration_us"] > 0

    from ascendopt.analyze.traces import load_profile

    profile = load_profile(out_dir)  # the parent folder: the newest run plus its set sibling
    assert profile.kind == "cpu" and "_scale_add_kernel" in set(profile.kernels["name"].astype(str))
    assert len(profile.runs) == 2


BAD_WORKLOADS = {
    "syntax": ("def workload(:\n    pass\n", "wl.py:1: syntax error"),
    "no_workload": ("x = 1\n", "wl.py: workload() is not defined"),
    "module_raises": ("import os\nraise RuntimeError('no data file')\n",
                      "wl.py:2: module code raised RuntimeError: no data file"),
    "workload_raises": ("def workload():\n    return 1 / 0\n",
                        "wl.py:2: workload() raised ZeroDivisionError: division by zero"),
    "module_exits": ("import sys\nsys.exit(4)\n", "wl.py: module code called exit(4)"),
    "crash": ("import os\n\ndef workload():\n    os._exit(3)\n",
              "the workload process exited with code 3 and no result"),
}


@pytest.mark.parametrize("case", list(BAD_WORKLOADS))
def test_bad_workload_gives_one_line_exit_2_and_no_folder(cli, tmp_path, case):
    source, expected = BAD_WORKLOADS[case]
    wl = _write(tmp_path, source)
    out_dir = tmp_path / "prof"
    code, out, err = cli("collect", "--exec-file", str(wl), "--out-dir", str(out_dir))
    assert code == 2 and out == ""
    assert expected in _one_line(err)
    assert not out_dir.exists() or list(out_dir.iterdir()) == []  # no half-written folder, no staging


def test_hang_past_timeout_is_killed(cli, tmp_path):
    pid_file = tmp_path / "pid"
    # The hang is in the module code so the test does not wait for torch to load in the child;
    # a hang inside workload() takes the same path (the parent's wait times out, the group is killed).
    wl = _write(tmp_path, f"""\
        import os, time
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(600)

        def workload():
            pass
        """)
    out_dir = tmp_path / "prof"
    t0 = time.monotonic()
    code, _, err = cli("collect", "--exec-file", str(wl), "--out-dir", str(out_dir), "--timeout", "3")
    assert code == 2 and "timed out after 3 s" in _one_line(err)
    assert time.monotonic() - t0 < 60
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)  # the child (its whole process group) is gone
    assert list(out_dir.iterdir()) == []


@pytest.mark.parametrize(
    "args, message",
    [((), "exactly one of --exec-file FILE or --kernel NAME"),
     (("--exec-file", "x.py", "--kernel", "k"), "exactly one of"),
     (("--exec-file", "/nonexistent/wl.py"), "--exec-file /nonexistent/wl.py: not found"),
     (("--exec-file", "WL", "--aic-metrics", "pipe,bogus"), "unknown metric group 'bogus'"),
     (("--exec-file", "WL", "--steps", "1"), "steps=1: must be >="),
     (("--exec-file", "WL", "--timeout", "0"), "--timeout 0: must be > 0"),
     (("--kernel", "no_such_kernel"), "unknown kernel 'no_such_kernel'")],
)
def test_usage_errors(cli, tmp_path, args, message):
    wl = _write(tmp_path, "def workload():\n    pass\n")
    args = tuple(str(wl) if a == "WL" else a for a in args)
    code, out, err = cli("collect", *args, "--out-dir", str(tmp_path / "prof"))
    assert code == 2 and out == "" and message in _one_line(err)
    assert not (tmp_path / "prof").exists() or list((tmp_path / "prof").iterdir()) == []


def test_cuda_without_ncu_fails_before_running(tmp_path, monkeypatch):
    from ascendopt.collect import api, collect_exec_file
    from ascendopt.errors import EnvironmentProblem

    monkeypatch.setattr(api, "_backend", lambda: "cuda")
    monkeypatch.setenv("PATH", "/nonexistent")
    marker = tmp_path / "ran"
    wl = _write(tmp_path, f"open({str(marker)!r}, 'w')\n\ndef workload():\n    pass\n")
    with pytest.raises(EnvironmentProblem, match="ncu") as exc:
        collect_exec_file(wl, metric_groups="pipe", out_dir=tmp_path / "prof")
    assert exc.value.exit_code == 5 and not marker.exists() and not (tmp_path / "prof").exists()


def test_workload_loader_in_process(tmp_path):
    """The loader's remaining cases without a child process (same code the child runs)."""
    from ascendopt.collect.workload import WorkloadFailure, load_exec_file

    not_callable = _write(tmp_path, "x = 1\nworkload = 3\n", "nc.py")
    with pytest.raises(WorkloadFailure, match=r"nc.py:2: workload\(\) is not callable"):
        load_exec_file(not_callable)
    exits = _write(tmp_path, "import sys\n\ndef workload():\n    sys.exit(4)\n", "ex.py")
    with pytest.raises(WorkloadFailure, match=r"ex.py: workload\(\) called exit\(4\)"):
        load_exec_file(exits)()
    nested = _write(tmp_path, "def helper():\n    raise KeyError('T')\n\ndef workload():\n    helper()\n", "ne.py")
    with pytest.raises(WorkloadFailure, match=r"ne.py:2: workload\(\) raised KeyError: 'T'"):
        load_exec_file(nested)()  # the innermost line in the user's file, not the call site


@pytest.mark.parametrize("extra", [(), ("--json",), ("--kernel-filter", "axpb"), ("--kernel-filter", "axpb", "--json")])
def test_analyze_flag_prints_what_the_analyze_command_prints(cli, tmp_path, monkeypatch, extra):
    """`collect --analyze` analyzes the new folders in-process and prints exactly `analyze FOLDER...`'s output
    (stderr: a "profile:" line per folder first, in text mode). The REAL H200 cuda folder stands in for a
    fresh collection, so no profiler runs."""
    import shutil

    import ascendopt.collect
    from profile_variants import CUDA

    folder = tmp_path / "prof" / "wl_20260101-000000_ascendopt_cuda"
    shutil.copytree(CUDA, folder)
    (folder / "ascendopt_profile.yaml").write_text(yaml.safe_dump(
        {"schema": 1, "metric_group": "PipeUtilization", "backend": "cuda", "hardware_counters": True}))
    monkeypatch.setattr(ascendopt.collect, "collect_exec_file", lambda *a, **k: [folder])
    code, out, err = cli("collect", "--exec-file", "wl.py", "--analyze", *extra)
    assert code == 0, err
    a_code, a_out, a_err = cli("analyze", str(folder), *extra)
    same = json_payload(out) == json_payload(a_out) if "--json" in extra else out == a_out  # envelopes: the data
    assert a_code == 0 and same and "_axpb_kernel" in out
    assert err == ("" if "--json" in extra else f"profile: {folder}\n") + a_err
