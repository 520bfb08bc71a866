"""benchmarks/row_forms_study.py: every kernel form computes the l2norm forward (interpreter, small rows), and
a malformed form name is rejected before any device work."""

import pytest
import torch

import _benchmarks

study = _benchmarks.load("row_forms_study")


@pytest.mark.parametrize("form", ["loop2", "one1", "one2", "one4", "one2h", "one1h", "one2p", "one2e", "one2g",
                                  "one2s", "pre1", "pre4", "pre8", "vec1", "vec4"])
def test_forms_match_the_fp32_l2norm(form):
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(3)) + 0.1
    y = study.form_fn(form, 8, 64)(x)
    want = x * torch.rsqrt((x * x).sum(-1, keepdim=True) + study.EPS)
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("form, d, too_narrow, multiple", [
    ("warp4", 512, 320, 256), ("warp1", 512, 320, 256),  # each row in one warp, one pass
    ("two4", 2048, 512, 1024), ("two8", 2048, 512, 1024),  # ... in two passes, four 256-column chunks at a time
    ("pair2", 1024, 768, 512), ("pair4", 1024, 768, 512),  # each row on two warps
    ("tma1", 512, 320, 256), ("tma2", 512, 320, 256),  # tensor descriptors, boxes of [D/256, 256]
    ("rows4", 512, 320, 256), ("rows2", 512, 320, 256),  # each row in one warp under Triton 3.6
])
def test_warp_row_forms_match_the_fp32_l2norm(form, d, too_narrow, multiple):
    x = torch.randn(8, d, generator=torch.Generator().manual_seed(4)) + 0.1
    y = study.form_fn(form, 8, d)(x)
    want = x * torch.rsqrt((x * x).sum(-1, keepdim=True) + study.EPS)
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=f"D={too_narrow} is not a multiple of {multiple}"):
        study.form_fn(form, 8, too_narrow)


@pytest.mark.parametrize("bad", ["one3", "three2", "one", "loop2x", "one0", "warp4h", "warp4e", "one2x", "two4g",
                                 "pair2s", "pre3", "pre", "vec2s", "tma2h"])
def test_malformed_forms_are_named(bad):
    with pytest.raises(ValueError, match=repr(bad)):
        study.parse_form(bad)


def test_rows_not_a_multiple_of_the_tile_are_refused():
    with pytest.raises(ValueError, match="not a multiple of 4"):
        study.form_fn("one4", 10, 64)


@pytest.mark.parametrize("backend", ["cpu", "cuda"])  # cpu: not cuda; cuda: not available on this machine
def test_no_cuda_is_one_line_exit_5_and_writes_nothing(tmp_path, backend):
    import subprocess
    import sys

    out = tmp_path / "never.json"
    proc = subprocess.run([sys.executable, str(_benchmarks.BENCHMARKS / "row_forms_study.py"), "--forms", "one2",
                           "--out", str(out)], capture_output=True, text=True, timeout=300,
                          env={"ASCENDOPT_BACKEND": backend, "PATH": "/usr/bin:/bin"})
    err = proc.stderr.strip()
    assert proc.returncode == 5, proc.stderr
    assert err.startswith("error: ") and "cuda" in err and "\n" not in err
    assert not out.exists()


def test_too_few_pairs_is_one_line_exit_2_before_any_device_work(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "never.json"
    proc = subprocess.run([sys.executable, str(_benchmarks.BENCHMARKS / "row_forms_study.py"), "--pairs", "3",
                           "--out", str(out)], capture_output=True, text=True, timeout=300,
                          env={"ASCENDOPT_BACKEND": "cpu", "PATH": "/usr/bin:/bin"})
    err = proc.stderr.strip()
    assert proc.returncode == 2, proc.stderr
    assert err == "error: --pairs 3: at least 6 are needed"
    assert not out.exists()


@pytest.mark.parametrize("name, warps", [("fla1", 1), ("fla2", 2), ("fla4", 4), ("lib", None), ("one2", None)])
def test_fla_at_a_warp_count_is_a_form(name, warps):
    assert study.fla_warps(name) == warps


@pytest.mark.parametrize("bad", ["fla3", "fla8", "fla", "fla2h"])
def test_fla_at_other_warp_counts_is_refused(bad):
    with pytest.raises(ValueError, match=repr(bad)):
        study.form_fn(bad, 8, 64)


@pytest.mark.parametrize("option", ["--out", "--trace"])
def test_a_file_in_a_missing_folder_is_one_line_exit_2_before_any_device_work(tmp_path, option):
    import subprocess
    import sys

    out, trace = tmp_path / "forms.json", tmp_path / "trace.json"
    bad = tmp_path / "no_such_folder" / "x.json"
    args = {"--out": str(bad if option == "--out" else out), "--trace": str(bad if option == "--trace" else trace)}
    proc = subprocess.run([sys.executable, str(_benchmarks.BENCHMARKS / "row_forms_study.py"), "--forms", "one2",
                           *[a for kv in args.items() for a in kv]], capture_output=True, text=True, timeout=300,
                          env={"ASCENDOPT_BACKEND": "cpu", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"error: {option} {bad}: its folder does not exist"
    assert not out.exists() and not trace.exists()
