"""``optimize-round --auto`` on a mix of shape cases (issue 40 item 5): the fastest screened candidates are
screened on every case, the mix ranks them, and where no single configuration wins on every case it says which
wins where and by how much (evidence for a per-bucket dispatch; nothing is applied)."""

import dataclasses

import pytest

import _gate_kernels as gk
from ascendopt.cli.render import mix_screening_lines
from ascendopt.freeze.task import freeze_kernel
from ascendopt.rounds import auto as round_auto
from ascendopt.rounds import records as rounds
from ascendopt.workspace import Workspace

SMALL, LARGE = "B=2,T=10,D=32", "B=2,T=64,D=32"


def _table(times):
    return [({"BLOCK": b}, dict(ms)) for b, ms in times.items()]


def test_one_configuration_fastest_everywhere_wins_all():
    found = round_auto.mix_winners(_table({64: {"a": 1.0, "b": 4.0}, 128: {"a": 0.5, "b": 2.0}}),
                                   {"a": 0.5, "b": 0.5}, {"BLOCK": 64})
    assert found["overall"] == {"BLOCK": 128} and found["one_wins_all"]
    assert [row["key"] for row in found["table"]] == ["BLOCK=128", "BLOCK=64"]
    assert [x["vs_start"] for x in found["winners"]] == [2.0, 2.0]
    assert mix_screening_lines(found) == ["on the mix: BLOCK=128 is the fastest on every shape case (weighted "
                                          "fastest too): no per-bucket dispatch is needed"]


def test_where_none_wins_everywhere_it_says_which_wins_where_and_by_how_much():
    found = round_auto.mix_winners(
        _table({32: {"a": 0.8, "b": 6.0}, 64: {"a": 1.0, "b": 4.0}, 128: {"a": 1.2, "b": 2.0}, 16: {"a": 0.5}}),
        {"a": 0.5, "b": 0.5}, {"BLOCK": 64})
    # BLOCK=16 failed on b: no weighted time, ranked last, but it still wins a
    assert found["overall"] == {"BLOCK": 128} and not found["one_wins_all"]
    assert found["table"][-1]["key"] == "BLOCK=16" and found["table"][-1]["weighted_ms"] is None
    a, b = found["winners"]
    assert a["config"] == {"BLOCK": 16} and a["vs_overall"] == pytest.approx(1.2 / 0.5) and not a["overall_wins"]
    assert a["vs_start"] == pytest.approx(2.0) and b["overall_wins"] and b["vs_start"] == pytest.approx(2.0)
    lines = mix_screening_lines(found)
    assert lines[0].startswith("on the mix: no single configuration wins on every shape case; BLOCK=128 is the "
                               "weighted fastest") and "nothing is applied" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("  a (weight 50%): BLOCK=16 wins at 500.00 us, 2.400x the speed of "
                                                   "BLOCK=128 there, 2.000x the best so far's")


@pytest.fixture
def ws(tmp_path, monkeypatch):
    # a planted cost per program step: small blocks pay on the large case, large blocks on the small one
    def run(inputs, config, mode):
        out = gk.t_scale(inputs, config, mode)
        small = inputs["x"].numel() < 1000
        gk.VIRTUAL["ms"] += 0.05 * config["BLOCK"] / 32 if small else 0.5 * 128 / config["BLOCK"]
        return out

    gk.install(monkeypatch, dataclasses.replace(gk.SPEC, run=run))
    w = Workspace(tmp_path / ".ascendopt")
    freeze_kernel(w, kernel="t_scale", shapes=[SMALL, LARGE], dtype="fp32", mode="fwd",
                  config={"BLOCK": 64, "EXTRA": 50}, max_rounds=5)
    return w


def test_auto_on_two_shape_cases_screens_the_fastest_on_both_and_names_the_winner_of_each(ws):
    result = round_auto.run_auto(ws, hypothesis="auto", pairs=12, confirm=0, timer=gk.virtual_clock)
    mix = result["mix"]
    assert mix["cases"] == [SMALL, LARGE] and mix["weights"] == {SMALL: 0.5, LARGE: 0.5}
    assert len(mix["table"]) == min(round_auto.MIX_TOP, result["screening"]["covered"])
    assert all(row["weighted_ms"] is not None and set(row["ms"]) == {SMALL, LARGE} for row in mix["table"])
    assert "BLOCK=64,EXTRA=50" in {row["key"] for row in mix["table"]}  # the best so far is always screened
    # EXTRA=0 everywhere; BLOCK=32 on the small case, BLOCK=128 on the large one and on the weighted total
    assert mix["overall"] == {"BLOCK": 128, "EXTRA": 0} and not mix["one_wins_all"]
    small, large = mix["winners"]
    assert small["config"] == {"BLOCK": 32, "EXTRA": 0} and small["vs_overall"] > 1.1
    assert large["overall_wins"] and large["vs_start"] > 1.0
    assert rounds.load_rounds(ws) == []  # --confirm 0: screened only, nothing recorded


def test_the_auto_result_with_a_mix_is_valid_against_the_schema():
    import json

    import jsonschema

    from ascendopt.cli import envelope

    mix = round_auto.mix_winners(_table({32: {"a": 0.8, "b": 6.0}, 128: {"a": 1.2, "b": 2.0}}),
                                 {"a": 0.5, "b": 0.5}, {"BLOCK": 32})
    result = {"screening": {"rows": [], "total": 0, "covered": 0, "fresh": 0, "searched": 0, "stopped": "covered",
                            "seconds": 0.0, "best": None, "budget": None, "budget_s": 1.0, "cache": "c",
                            "start_ms": 1.0, "case": "a"},
              "mix": json.loads(json.dumps(mix)), "confirmed": [], "rounds": [], "pruned": 0, "space": 2,
              "feasible": 2, "best": {"BLOCK": 32}, "bound": "vector_bound", "ub_chip": None,
              "ub_overflow_allowed": False, "over_budget_rounds": [], "best_ub_warning": None}
    validator = jsonschema.Draft202012Validator(envelope.schema("optimize-round"), registry=envelope._registry())
    validator.validate(result)
    result["mix"]["winners"][0]["vs_overall"] = "fast"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(result)


AUTOTUNED = """\
import time

import torch
import triton
import triton.language as tl


def host_bench(fn, quantiles=None, **kw):  # Triton's interpreter has no device benchmarker
    t = time.perf_counter()
    fn()
    ms = (time.perf_counter() - t) * 1e3
    return [ms] * len(quantiles) if quantiles else ms


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 256})], key=["n"],
                 do_bench=host_bench)
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2 + 1, mask=mask)


def my_op(x):
    y = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    return y
"""


def test_own_code_auto_times_every_config_on_every_bucket_and_pins_the_weighted_fastest(tmp_path, monkeypatch, cli):
    from _cli_json import json_payload
    from _own_code import frozen_shaped_repo

    test = "import torch\nfrom op import my_op\n\n\ndef test_op():\n    x = torch.ones(8)\n" \
           "    assert torch.equal(my_op(x), x * 2 + 1)\n"
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    root = frozen_shaped_repo(tmp_path / "repo", AUTOTUNED, test, small_weight=0.7)
    monkeypatch.chdir(root)
    code, out, err = cli("optimize-round", "--hypothesis", "pick a tile", "--auto", "--json")
    assert code == 0, err[-3000:]
    result = json_payload(out)
    mix = result["mixes"]["scale_kernel"]
    assert mix["cases"] == ["bucket 1 [[16, 64]]", "bucket 2 [[256, 64]]"]
    assert mix["weights"] == {"bucket 1 [[16, 64]]": 0.7, "bucket 2 [[256, 64]]": 0.3}
    by_block = {row["config"]["BLOCK"]: row["ms"] for row in mix["table"]}
    # the interpreter pays per program: 16-element blocks launch 16x the programs, on each bucket
    for case in mix["cases"]:
        assert by_block[256][case] < by_block[16][case]
    assert by_block[16]["bucket 2 [[256, 64]]"] > by_block[16]["bucket 1 [[16, 64]]"]  # each bucket's own inputs
    assert mix["overall"]["BLOCK"] == 256 and mix["one_wins_all"]
    (pin,) = result["pin"]
    assert pin["kwargs"] == {"BLOCK": 256}
    code, out, err = cli("optimize-round", "--hypothesis", "pick a tile", "--auto")  # the cache holds the buckets
    assert code == 0, err[-3000:]
    text = " ".join(out.split())
    assert "2 of 2 candidates (0 screened now, 2 cached)" in text and "weighted over the shape mix" in text
    assert "is the fastest on every shape case" in text
