"""The timed verdict over a served-shape mix (issue 40): every bucket is timed on trusted inputs of its shape, the
verdict is the weighted speedup, and a heavy bucket that is slower is red (exit 4) naming it, even when the
weighted total is faster.

One repository is frozen per module with a hand-written mix: a heavy small bucket (16 rows, 70 % of the device
time, decode-like) and a light large one (256 rows, 30 %). The op sleeps a fixed time per call plus a time per
row, so each change below sets each bucket's speed by a wide, deterministic margin (2x or more) that load cannot
flip.
"""


import pytest

from _cli_json import json_payload
from _own_code import frozen_shaped_repo, working_copy
from conftest import run_cli

OP = "import time\n\n\ndef my_op(x):\n    time.sleep(0.003 + x.shape[0] * 2e-5)\n    return x * 2 + 1\n"
TEST = "import torch\nfrom op import my_op\n\n\ndef test_my_op():\n    x = torch.ones(4, 4)\n" \
       "    assert torch.equal(my_op(x), x * 2 + 1)\n"
@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    return frozen_shaped_repo(tmp_path_factory.mktemp("shape-verdict") / "repo", OP, TEST, small_weight=0.7)


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    return working_copy(frozen_repo, tmp_path, monkeypatch)


def _gate(repo, op: str):
    (repo / "op.py").write_text(op)
    code, out, err = run_cli("gate", "--json", "--pairs", "12")
    return code, {s["name"]: s for s in json_payload(out)["stages"]}, err


def test_freeze_records_a_baseline_per_timed_bucket(frozen_repo):
    import yaml

    contract = yaml.safe_load((frozen_repo / ".ascendopt" / "contract.yaml").read_text())
    cases = [b["case"] for b in contract["baseline"]]
    assert cases == ["bench.py", "bucket 1 [[16, 64]]", "bucket 2 [[256, 64]]"]
    small, large = contract["baseline"][1]["median_ms"], contract["baseline"][2]["median_ms"]
    assert large > small  # 256 rows sleep longer than 16: the bucket's own inputs were made and timed


def test_faster_on_the_large_bucket_and_slower_on_the_heavy_small_one_is_red_naming_it(repo):
    op = ("import time\n\n\ndef my_op(x):\n    if x.shape[0] <= 64:\n        time.sleep(0.012)\n"
          "    else:\n        time.sleep(0.001)\n    return x * 2 + 1\n")
    code, stages, err = _gate(repo, op)
    perf = stages["performance"]
    assert code == 4 and perf["status"] == "fail", err[-2000:]
    weighted = perf["data"]["weighted"]
    assert weighted["floors"] == ["bucket 1 [[16, 64]]"]
    assert perf["summary"].startswith("regression: bucket 1 [[16, 64]] (weight 70.0%) is slower"), perf["summary"]
    by_case = {c["case"]: c for c in perf["data"]["comparisons"]}
    assert by_case["bucket 2 [[256, 64]]"]["verdict"] == "faster"  # the large bucket did get faster


def test_an_honest_change_faster_on_every_bucket_is_green_with_the_weighted_speedup(repo):
    op = "import time\n\n\ndef my_op(x):\n    time.sleep(0.001 + x.shape[0] * 0.5e-5)\n    return x * 2 + 1\n"
    code, stages, err = _gate(repo, op)
    perf = stages["performance"]
    assert code == 0 and perf["status"] == "pass", err[-2000:]
    weighted = perf["data"]["weighted"]
    assert weighted["verdict"] == "faster" and weighted["speedup"] > 1.5 and weighted["floors"] == []
    assert weighted["timed_weight"] == pytest.approx(1.0)
    assert [c["case"] for c in perf["data"]["comparisons"]] == ["bucket 1 [[16, 64]]", "bucket 2 [[256, 64]]"]
    assert perf["summary"].startswith("weighted over the shape mix:")


def test_status_names_the_mix_the_verdict_is_weighed_over(repo):
    code, out, err = run_cli("status", "--json")
    assert code == 0, err
    shapes = json_payload(out)["contract"]["shapes"]
    assert shapes == {"kernel": "my_op_kernel", "buckets": 2, "coverage": 1.0, "source": "hand-written",
                      "weights": {"bucket 1 [[16, 64]]": 0.7, "bucket 2 [[256, 64]]": 0.3}}
    code, out, err = run_cli("status")
    assert code == 0 and "2 bucket(s) of my_op_kernel from a hand-written mix, covering 100.0%" in " ".join(out.split())


def test_a_round_that_slows_the_heavy_bucket_is_reverted_naming_it_and_status_rounds_shows_the_buckets(repo):
    (repo / "op.py").write_text("import time\n\n\ndef my_op(x):\n    if x.shape[0] <= 64:\n        time.sleep(0.012)\n"
                                "    else:\n        time.sleep(0.001)\n    return x * 2 + 1\n")
    code, out, err = run_cli("optimize-round", "--hypothesis", "tiling: one tile for every size", "--pairs", "12",
                             "--no-reprofile", "--no-precheck", "--json")
    assert code == 0, err[-2000:]
    record = json_payload(out)  # the round record, as written
    assert record["verdict"] == "revert", record["summary"]
    weighted = record["timing"]["weighted"]
    assert weighted["vs_best"]["floors"] == ["bucket 1 [[16, 64]]"]
    assert [r["case"] for r in record["timing"]["cases"]] == ["bucket 1 [[16, 64]]", "bucket 2 [[256, 64]]"]
    assert record["summary"]["verdict_reason"].startswith("shape mix: bucket 1 [[16, 64]] (weight 70.0%) is slower")
    code, out, err = run_cli("status", "--rounds", "--json")
    assert code == 0, err
    rows = json_payload(out)["ledger"][0]["buckets"]
    assert [r["bucket"] for r in rows] == ["bucket 1 [[16, 64]]", "bucket 2 [[256, 64]]"]
    assert rows[0]["floor"] == "broken" and rows[0]["weight"] == 0.7 and rows[0]["speedup"] < 0.5
    # the large bucket got 6x faster: never a broken floor (on a loaded host its band may leave it undecided)
    assert rows[1]["floor"] != "broken" and rows[1]["speedup"] > 2
