"""`optimize-round --auto` on own code: the @triton.autotune configs of the user's kernel screened one at a
time (each pinned in its own run of the frozen workload, CPU interpreter), a wrong config screened out, the
fastest proposed as the config to pin; configs carrying num_warps/num_stages refused with lint AO101's text."""

import json
import textwrap

import pytest

from _cli_json import json_payload
from _own_code import commit_repo, freeze_in
from ascendopt.lint.registry import get_rule
from ascendopt.rounds import records as rounds
from ascendopt.tune import autotune
from ascendopt.workspace import Workspace

CONFIGS = '[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 128, "WRONG": 1})]'
OP = textwrap.dedent("""\
    import time

    import torch
    import triton
    import triton.language as tl


    def host_bench(fn, quantiles=None, **kw):  # Triton's interpreter has no device benchmarker
        t = time.perf_counter()
        fn()
        ms = (time.perf_counter() - t) * 1e3
        return [ms] * len(quantiles) if quantiles else ms


    def no_wrong(configs, named_args, **kwargs):  # the planted wrong config never wins the real autotuning
        return [c for c in configs if not c.kwargs.get("WRONG")]


    @triton.autotune(configs=CONFIGS, key=["n"], do_bench=host_bench,
                     prune_configs_by={"early_config_prune": no_wrong})
    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, WRONG: tl.constexpr = 0):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, x * (3.0 if WRONG else 2.0), mask=mask)


    def my_op(x):
        y = torch.empty_like(x)
        n = x.numel()
        scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        return y
    """)
TEST = "import torch\nfrom op import my_op\n\n\ndef test_doubles():\n    x = torch.ones(8)\n    " \
       "assert torch.equal(my_op(x), 2 * x)\n"
BENCH = "import torch\nfrom op import my_op\n\nx = torch.arange(4096, dtype=torch.float32)\n\n\n" \
        "def workload():\n    return my_op(x)\n"


def _repo(tmp_path, configs=CONFIGS):
    root = commit_repo(tmp_path / "repo", {"op.py": OP.replace("CONFIGS", configs), "tests/test_op.py": TEST,
                                           "bench.py": BENCH})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "scale_kernel", "-w", str(root / ".ascendopt"))
    assert code == 0, err[-2000:]
    return root


def test_sites_are_read_statically_and_a_runtime_list_is_named():
    (site,) = autotune.sites_in_source(OP.replace("CONFIGS", CONFIGS), "op.py")
    assert (site.kernel, site.line, [c.kwargs for c in site.configs]) == (
        "scale_kernel", 19, [{"BLOCK": 16}, {"BLOCK": 128}, {"BLOCK": 128, "WRONG": 1}])
    (dynamic,) = autotune.sites_in_source(OP.replace("CONFIGS", "[triton.Config({'BLOCK': b}) for b in (16, 32)]"),
                                          "op.py")
    assert dynamic.configs == () and "not a literal list" in dynamic.why_not


def test_own_code_auto_screens_each_config_pinned_and_names_the_one_to_pin(tmp_path, monkeypatch, cli):
    root = _repo(tmp_path)
    monkeypatch.chdir(root)
    ws = str(root / ".ascendopt")
    code, out, err = cli("optimize-round", "-w", ws, "--hypothesis", "pick a tile", "--auto", "--json")
    assert code == 0, err[-3000:]
    result = json_payload(out)
    rows = {r["config"]["config"]: r for r in result["screening"]["rows"]}
    assert result["own_code"] and result["screening"]["stopped"] == "covered" and set(rows) == {0, 1, 2}
    assert rows[2]["ms"] is None and rows[2]["smoke"] == "fail"
    assert rows[2]["note"].startswith("outputs differ from the first config's")
    assert rows[0]["smoke"] == rows[1]["smoke"] == "pass"
    # 4096 elements: 256 programs of 16 against 32 of 128 -- the interpreter pays per program
    assert rows[1]["ms"] < rows[0]["ms"]
    (pin,) = result["pin"]
    assert (pin["kernel"], pin["path"], pin["config"], pin["kwargs"]) == ("scale_kernel", "op.py", 1, {"BLOCK": 128})
    assert rounds.load_rounds(Workspace(root / ".ascendopt")) == []  # nothing recorded, nothing kept

    # a second run screens nothing again: the entries are cached (same sources, same device)
    code, out, err = cli("optimize-round", "-w", ws, "--hypothesis", "pick a tile", "--auto")
    assert code == 0, err[-3000:]
    text = " ".join(out.split())
    assert "3 of 3 candidates (0 screened now, 3 cached)" in text
    assert "pin: op.py:19 scale_kernel: config #1 (BLOCK=128)" in text
    cache = json.loads((root / ".ascendopt" / "screen-cache.json").read_text())
    assert [key.split("|")[:3] for key in cache["entries"]] == [["screen", "own", "bench.py"]]
    code, _, err = cli("optimize-round", "-w", ws, "--hypothesis", "x", "--auto", "--confirm", "1")
    assert code == 2 and "--confirm applies to bundled kernels" in err


def _cuda_only_op(extra: str) -> str:
    config = (f'triton.Config({{"BLOCK": 16, {extra}}})' if extra.startswith('"') else
              f'triton.Config({{"BLOCK": 16}}, {extra})')
    return OP.replace("CONFIGS", f"[{config}]")


@pytest.mark.parametrize("extra", ['"num_warps": 4', "num_warps=4", "num_stages=2"])
def test_cuda_only_autotune_configs_are_found_with_the_lints_findings(tmp_path, extra):
    (tmp_path / "op.py").write_text(_cuda_only_op(extra))
    (site,) = autotune.sites_in_source((tmp_path / "op.py").read_text(), "op.py")
    (refusal,) = autotune.refusals(tmp_path, [site])
    assert refusal.startswith("op.py:19: AO101 ") and "unsupported on Ascend" in refusal
    (tmp_path / "clean.py").write_text(OP.replace("CONFIGS", CONFIGS))
    assert autotune.refusals(tmp_path, autotune.find_sites(tmp_path, ["clean.py"])) == []


def test_auto_refuses_a_cuda_only_autotune_config_with_the_lints_message(tmp_path, monkeypatch, cli):
    root = commit_repo(tmp_path / "repo", {"op.py": _cuda_only_op("num_warps=4"), "tests/test_op.py": TEST,
                                           "bench.py": BENCH})
    (refusal,) = autotune.refusals(root, autotune.sites_in_source((root / "op.py").read_text(), "op.py"))
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "scale_kernel", "-w", str(root / ".ascendopt"))
    assert code == 0, err[-2000:]
    monkeypatch.chdir(root)
    code, _, err = cli("optimize-round", "-w", str(root / ".ascendopt"), "--hypothesis", "x", "--auto")
    text = " ".join(err.split())
    assert code == 2 and refusal in text and " ".join(get_rule("AO101").fix.split())[:60] in text


def test_own_code_without_autotune_is_told_what_auto_does(tmp_path, monkeypatch, cli):
    from _own_code import sleep_repo_files

    root = commit_repo(tmp_path / "repo", sleep_repo_files(0.001))
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_op_kernel", "-w", str(root / ".ascendopt"))
    assert code == 0, err[-2000:]
    monkeypatch.chdir(root)
    code, _, err = cli("optimize-round", "-w", str(root / ".ascendopt"), "--hypothesis", "x", "--auto")
    assert code == 2 and "--auto on own code screens @triton.autotune configs: none in the" in err
