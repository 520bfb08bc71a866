"""`ascendopt analyze --shapes` and `ascendopt freeze --shapes-from / --shapes-file` through the CLI.

The profile of the "model" is a real torch.profiler trace recorded here (CPU, ``record_shapes=True``) of a
custom op whose name matches the own-code repository's target kernel (``my_op_kernel``)."""

import hashlib
from pathlib import Path

import pytest

from _cli_json import json_envelope, json_payload
from _own_code import commit_repo, sleep_repo_files
from ascendopt.contract.model import load
from ascendopt.workspace import Workspace

DATA = Path(__file__).resolve().parents[1] / "data"
ADVISOR = DATA / "ascend/advisor_pipe"
OP_SUMMARY = DATA / "ascend/msprof_op_summary"
# (input dims, calls) of the recorded model: three sequence lengths, the middle one served most
SERVED = {(4, 64, 8): 5, (4, 96, 8): 2, (4, 200, 8): 1}


def _model_trace(path: Path) -> Path:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from ascendopt.collect.kineto import silence_kineto_log

    @torch.library.custom_op("shapes_test::my_op_kernel", mutates_args=())
    def my_op_kernel(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * w

    silence_kineto_log()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for dims, calls in SERVED.items():
            for _ in range(calls):
                my_op_kernel(torch.ones(*dims), torch.ones(dims[-1]))
    prof.export_chrome_trace(str(path))
    return path


@pytest.fixture(scope="module")
def model_trace(tmp_path_factory):
    return _model_trace(tmp_path_factory.mktemp("model") / "trace.json")


def test_analyze_shapes_prints_the_histogram_and_json_validates(cli):
    code, out, err = cli("analyze", str(ADVISOR), "--shapes", "-k", "FlashAttentionScore")
    assert code == 0, err
    assert "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore_varlen: 1 launch, 405.2 us" in out
    assert "4096,2,511;" in out and "####" in out  # the table may wrap the long shape text
    code, out, err = cli("analyze", str(ADVISOR), "--shapes", "-k", "FlashAttentionScore", "--json")
    assert code == 0, err
    data = json_envelope(out)["data"]  # validated against the analyze schema's shapes report
    assert data["source"] == "kernel_details" and data["kernel_count"] == 3
    grad = data["kernels"][0]
    assert grad["launches"] == 4 and grad["shaped_share"] == 1.0 and grad["shapes"][0]["shapes"][4] == [4096, 4096]


def test_analyze_shapes_refuses_compare_and_says_when_nothing_is_recorded(cli):
    code, out, err = cli("analyze", str(ADVISOR), "--shapes", "--compare", str(ADVISOR))
    assert code == 2 and "--shapes reads one profile" in err
    code, out, err = cli("analyze", str(OP_SUMMARY), "--shapes")
    assert code == 0 and "main_kernel: 3 launches" in out and "recorded for 0.0 % of its time" in out


# the workload makes the inputs of any shape of a mix (freeze makes one set of every bucket before it records it)
SHAPED_BENCH = (
    "import torch\nfrom op import my_op\n\n\ndef inputs(seed, shape=None):\n"
    "    dims = shape[0] if shape is not None else [4, 64, 8]\n    return (torch.randn(*dims),)\n\n\n"
    "def workload(x):\n    with torch.profiler.record_function(\"my_op_kernel\"):\n        return my_op(x)\n")


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    commit_repo(root, {**sleep_repo_files(), "bench.py": SHAPED_BENCH})
    monkeypatch.chdir(root)
    return root


def test_freeze_shapes_from_a_recorded_trace_stores_the_mix(repo, model_trace, cli):
    code, out, err = cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                         "my_op_kernel", "--shapes-from", str(model_trace), "--no-profile", "--no-precheck", "--json")
    assert code == 0, err
    assert "served shapes from" in err and "covers 100.0 % of its profiled device time" in err
    payload = json_payload(out)  # validated against the freeze schema, shapes included
    assert len(payload["shapes"]["buckets"]) == 3
    contract = load(Workspace(repo / ".ascendopt"))
    mix = contract.shapes
    assert not contract.judges_one_shape and mix.kernel == "my_op_kernel"
    assert mix.source == {"kind": "profile", "path": str(model_trace),
                          "sha256": hashlib.sha256(model_trace.read_bytes()).hexdigest()}
    assert {tuple(map(tuple, b.shape)): b.launches for b in mix.buckets} == {
        (dims, (dims[-1],)): calls for dims, calls in SERVED.items()}
    assert sum(b.weight for b in mix.buckets) == pytest.approx(1.0, abs=1e-5) and mix.coverage == 1.0


def test_freeze_refuses_a_profile_without_shapes_and_a_bad_mix_file_before_running_anything(repo, cli):
    args = ("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter")
    code, out, err = cli(*args, "main_kernel", "--shapes-from", str(OP_SUMMARY))
    assert code == 2 and "record no input shapes (op_summary: Input Shapes is N/A)" in err
    bad = repo / "mix.yaml"
    bad.write_text("kernel: my_op_kernel\nbuckets:\n  - {shapes: [[4, 64, 8]], weight: 0.4}\n")
    code, out, err = cli(*args, "my_op_kernel", "--shapes-file", str(bad))
    assert code == 2 and f"{bad}: shapes.buckets: weights sum to 0.4, expected 1" in err
    code, out, err = cli(*args, "my_op_kernel", "--shapes-file", str(bad), "--shapes-from", str(OP_SUMMARY))
    assert code == 2 and "give one of --shapes-from PROFILE or --shapes-file MIX.yaml" in err
    code, out, err = cli("freeze", "--kernel", "rms_norm", "--shapes-file", str(bad))
    assert code == 2 and "--shapes-file: only for own code" in err
    assert not (repo / ".ascendopt" / "contract.yaml").exists()


def test_freeze_shapes_file_stores_a_hand_written_mix(repo, cli):
    mix = repo / "mix.yaml"
    mix.write_text("kernel: my_op_kernel\nbuckets:\n  - {shapes: [[4, 4096, 8], [8]], weight: 0.75}\n"
                   "  - {shapes: [[4, 64, 8], [8]], weight: 0.25}\n")
    code, out, err = cli("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                         "my_op_kernel", "--shapes-file", str(mix), "--no-profile", "--no-precheck")
    assert code == 0, err
    assert "served shapes" in out and "(hand-written)" in err
    stored = load(Workspace(repo / ".ascendopt")).shapes
    assert [b.weight for b in stored.buckets] == [0.75, 0.25] and stored.source["kind"] == "hand-written"
