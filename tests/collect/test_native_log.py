"""kineto's native log lines stay off the terminal during collection (issue 21); other stderr output passes."""

import os

from ascendopt.collect.native_log import quiet_native_log

USDT = b"USDT:2026-12-02 06:02:40 2541:2541 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
STAGE = b"STAGE:2026-12-02 06:03:05 2925:2925 SyncActivityProfilerHandler.cpp:51] Completed Stage: Warm Up\n"


def test_native_lines_dropped_other_output_passes_through_in_order(capfd):
    with quiet_native_log() as dropped:
        os.write(2, b"before\n" + USDT)
        os.write(2, b"\r step 1/3")  # a progress update without a newline is not held back
        os.write(2, STAGE + b"USDT: not kineto's format, kept\n")
    err = capfd.readouterr().err
    assert err == "before\n\r step 1/3USDT: not kineto's format, kept\n"
    assert [line.split("]")[1].strip() for line in dropped] == ["profiler_start", "Completed Stage: Warm Up"]
    os.write(2, USDT)  # after the block fd 2 is the terminal again
    assert capfd.readouterr().err == USDT.decode()


def test_collecting_with_torch_profiler_prints_no_kineto_lines_or_warnings(capfd, tmp_path):
    """A real torch.profiler run (cpu backend, two schedule cycles: kineto logs at each start/stop)."""
    import torch

    from ascendopt.collect.settings import ProfileSettings
    from ascendopt.collect.torch_profiler import profile_torch

    settings = ProfileSettings.build(name="quiet", warmup=1, active=1, repeat=2)
    folder = profile_torch(lambda: torch.ones(64) * 2, settings, tmp_path, "cpu")
    err = capfd.readouterr().err
    assert (folder / "trace.json").is_file()
    assert "USDT" not in err and "STAGE:" not in err and "clears events" not in err, err
