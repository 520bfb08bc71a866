"""The UB model against hand-computed cases on the 192 KiB (910B) and 256 KiB (950) chips, and `ascendopt ub`."""

import itertools

import pytest

from _cli_json import json_payload
from ascendopt.device import ub
from ascendopt.errors import UsageError

KIB192, KIB256 = 196608, 262144


def test_peak_bytes_hand_computed():
    assert ub.peak_bytes({"BT": 64, "BD": 256}, "bf16", 6) == 196608  # 6 x 16384 x 2
    assert ub.peak_bytes({"BT": 16, "BK": 128}, "fp32", 4.5) == 36864  # 4.5 x 2048 x 4
    assert ub.peak_bytes({"BT": 3}, "int8", 2.5) == 8  # 7.5 bytes round up: a partial byte is still live
    assert ub.peak_bytes({"BT": 64}, "torch.float16", 1) == 128
    assert ub.peak_bytes({"BT": 64}, 4, 1) == 256  # dtype given as its size


def test_check_on_910b_192kib():
    c = ub.check({"BT": 64, "BD": 256}, "bf16", 6, KIB192, 0.85)
    # budget: 0.85 x 196608 = 167116.8
    assert (c.peak_bytes, c.budget_bytes, c.ub_bytes, c.safe) == (196608, 167116, KIB192, False)
    assert c.share == 1.0
    half = ub.check({"BT": 32, "BD": 256}, "bf16", 6, KIB192, 0.85)
    assert (half.peak_bytes, half.safe, half.share) == (98304, True, 0.5)
    assert ub.check({"BT": 64}, "fp32", 1, KIB192, 0.8).budget_bytes == 157286  # 157286.4 floored


def test_check_on_256kib_chip_fits_what_910b_does_not():
    c = ub.check({"BT": 64, "BD": 256}, "bf16", 6, KIB256, 0.85)
    assert (c.peak_bytes, c.budget_bytes, c.safe, c.share) == (196608, 222822, True, 0.75)  # 222822.4 floored


def test_margin_one_allows_exactly_full_ub():
    assert ub.check({"BT": 64, "BD": 256}, "bf16", 6, KIB192, 1.0).safe
    assert not ub.check({"BT": 64, "BD": 256}, "bf16", 6, KIB192 - 1, 1.0).safe


def test_solve_hand_computed():
    # per BT: 6 x 256 x 2 = 3072 B. 910B: 167116 // 3072 = 54 -> 32; 256 KiB: 222822 // 3072 = 72 -> 64.
    assert ub.solve({"BD": 256}, "BT", "bf16", 6, KIB192, 0.85) == 32
    assert ub.solve({"BT": 999, "BD": 256}, "BT", "bf16", 6, KIB256, 0.85) == 64
    assert ub.solve({"BD": 256}, "BT", "bf16", 6, KIB256, 0.85, upper=20) == 32  # capped at next_pow2(20)
    assert ub.solve({"BD": 256}, "BT", "bf16", 6, KIB256, 0.85, upper=1) == 1


def test_solve_is_the_largest_safe_power_of_two():
    for bd, mult, dtype, cap, margin in itertools.product([16, 100, 256, 4096], [1, 3.5, 8], ["bf16", "fp32"],
                                                          [KIB192, KIB256], [0.75, 0.85, 1.0]):
        best = ub.solve({"BD": bd}, "BT", dtype, mult, cap, margin)
        assert best & (best - 1) == 0
        assert ub.check({"BD": bd, "BT": best}, dtype, mult, cap, margin).safe
        assert not ub.check({"BD": bd, "BT": 2 * best}, dtype, mult, cap, margin).safe


@pytest.mark.parametrize("call, match", [
    (lambda: ub.peak_bytes({"BT": 0}, "bf16", 6), "BT=0"),
    (lambda: ub.peak_bytes({"BT": -4}, "bf16", 6), "BT=-4"),
    (lambda: ub.peak_bytes({"BT": True}, "bf16", 6), "BT=True"),
    (lambda: ub.peak_bytes({}, "bf16", 6), "at least one dimension"),
    (lambda: ub.peak_bytes({"BT": 64}, "bf16", 0), "multiplier 0"),
    (lambda: ub.peak_bytes({"BT": 64}, "bf16", float("nan")), "multiplier nan"),
    (lambda: ub.peak_bytes({"BT": 64}, "bf16", float("inf")), "multiplier inf"),
    (lambda: ub.peak_bytes({"BT": 64}, "bf17", 6), "unknown dtype 'bf17'"),
    (lambda: ub.peak_bytes({"BT": 64}, 0, 6), "dtype size 0"),
    (lambda: ub.check({"BT": 64}, "bf16", 6, 0), "UB size 0"),
    (lambda: ub.check({"BT": 64}, "bf16", 6, KIB192, 0.0), r"margin 0.0: must be in \(0, 1\]"),
    (lambda: ub.check({"BT": 64}, "bf16", 6, KIB192, 1.5), r"margin 1.5: must be in \(0, 1\]"),
    (lambda: ub.check({"BT": 64}, "bf16", 6, KIB192, -0.1), "margin -0.1"),
    (lambda: ub.check({"BT": 64}, "bf16", 6, KIB192, float("nan")), "margin nan"),
    (lambda: ub.solve({"BD": 10**9}, "BT", "fp32", 8, KIB192), "BT=1 already overflows"),
    (lambda: ub.solve({"BD": 16}, "BT", "fp32", 8, KIB192, upper=0), "upper bound 0"),
    (lambda: ub.solve({"BD": 16}, "", "fp32", 8, KIB192), "free dimension"),
    (lambda: ub.resolve_chip("Ascend999"), "unknown chip 'Ascend999'"),
    (lambda: ub.resolve_chip(""), "chip name is empty"),
    (lambda: ub.resolve_chip("NVIDIA H200"), "no Unified Buffer size"),
])
def test_bad_input_raises_a_clear_usage_error(call, match):
    with pytest.raises(UsageError, match=match):
        call()


@pytest.mark.parametrize("alias, chip, capacity", [
    ("Ascend910B2", "Ascend910B2", KIB192), ("910B2", "Ascend910B2", KIB192), ("ascend910b2", "Ascend910B2", KIB192),
    ("Ascend910B2C", "Ascend910B2", KIB192), ("910b4", "Ascend910B4", KIB192), ("950", "Ascend950", KIB256),
])
def test_chip_aliases(alias, chip, capacity):
    assert ub.resolve_chip(alias) == (chip, capacity)


# ---- the command -------------------------------------------------------------------------------------------

def test_cli_issue_example_overflows_with_exit_1(cli):
    code, out, _ = cli("ub", "--chip", "910B2", "--tile", "BT=64,BD=256", "--dtype", "bf16", "--mult", "6")
    assert code == 1
    for text in ("Ascend910B2", "196608 B", "100.0%", "167116 B (margin 0.85)", "OVERFLOWS"):
        assert text in out


def test_cli_json_safe_on_256kib(cli):
    code, out, _ = cli("ub", "--chip", "Ascend950", "--tile", "BT=64,BD=256", "--dtype", "bf16", "--mult", "6",
                       "--json")
    data = json_payload(out)
    assert code == 0
    assert {k: data[k] for k in ("chip", "ub_bytes", "peak_bytes", "budget_bytes", "share_of_ub", "safe", "elements")} \
        == {"chip": "Ascend950", "ub_bytes": KIB256, "peak_bytes": 196608, "budget_bytes": 222822, "share_of_ub": 0.75,
            "safe": True, "elements": 16384}


def test_cli_solve(cli):
    code, out, _ = cli("ub", "--chip", "910B2", "--tile", "BT=64,BD=256", "--dtype", "bf16", "--mult", "6",
                       "--solve", "BT", "--json")
    data = json_payload(out)
    assert code == 0 and data["solve"] == {"dim": "BT", "largest_safe": 32} and data["tile"] == {"BT": 32, "BD": 256}
    code, out, _ = cli("ub", "--chip", "910B2", "--tile", "BD=256", "--dtype", "bf16", "--mult", "6", "--solve", "BT")
    assert code == 0 and "largest safe BT" in out and "32" in out


def test_cli_default_chip_is_said(cli):
    code, out, err = cli("ub", "--tile", "BT=64", "--mult", "1", "--json")
    assert code == 0 and json_payload(out)["chip"] == "Ascend910B2" and "using Ascend910B2" in err


def test_cli_default_margin_is_the_model_default(cli):
    code, out, _ = cli("ub", "--ub-bytes", "1000", "--tile", "BT=100", "--mult", "2", "--json")
    data = json_payload(out)
    assert code == 0 and data["margin"] == ub.DEFAULT_MARGIN == 0.85 and data["budget_bytes"] == 850


def test_cli_ub_bytes_overrides_chip(cli):
    code, out, _ = cli("ub", "--ub-bytes", "1000", "--tile", "BT=100", "--dtype", "fp32", "--mult", "2", "--margin",
                       "0.8", "--json")
    data = json_payload(out)
    assert code == 0 and (data["ub_source"], data["peak_bytes"], data["budget_bytes"]) == ("--ub-bytes", 800, 800)


@pytest.mark.parametrize("args, message", [
    (["--chip", "nope", "--tile", "BT=64", "--mult", "6"], "--chip nope: unknown chip 'nope'"),
    (["--chip", "910B2", "--tile", "BT=0", "--mult", "6"], "--tile BT=0: size must be >= 1"),
    (["--chip", "910B2", "--tile", "BT64", "--mult", "6"], "expected NAME=SIZE"),
    (["--chip", "910B2", "--tile", "BT=6.5", "--mult", "6"], "size must be an integer"),
    (["--chip", "910B2", "--tile", "BT=1,BT=2", "--mult", "6"], "BT given twice"),
    (["--chip", "910B2", "--tile", "BT=64", "--mult", "6", "--margin", "1.2"], "margin 1.2"),
    (["--chip", "910B2", "--tile", "BT=64", "--mult", "0"], "multiplier 0"),
    (["--ub-bytes", "0", "--tile", "BT=64", "--mult", "6"], "UB size 0"),
    (["--chip", "interpreter", "--tile", "BT=64", "--mult", "6"], "pass --ub-bytes"),
])
def test_cli_bad_input_exit_2_one_line(cli, args, message):
    code, out, err = cli("ub", *args)
    assert code == 2 and out == "" and message in err and err.strip().count("\n") == 0
