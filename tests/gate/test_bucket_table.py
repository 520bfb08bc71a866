"""The per-bucket table of a verdict over a served-shape mix (issue 40 item 4), built from constructed timings:
the gate's stage data and ``--json`` (schema-valid), its text table, and one JUnit testcase per bucket that says
its weight and floor verdict."""

import json
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import jsonschema
import pytest

from ascendopt.cli import envelope
from ascendopt.contract.shapes import ShapeBucket, ShapeMix, as_shape
from ascendopt.gate.result import GateResult
from ascendopt.gate.stages import _weighted_result
from ascendopt.judge import bench
from ascendopt.judge.weighted import FLOOR_VERDICTS


def _timing(ms: float) -> bench.Timing:
    return bench.Timing(median_ms=ms, p20_ms=ms * 0.99, p80_ms=ms * 1.01, mean_ms=ms, cv=0.01, n=12)


def _comparison(base_ms: float, cand_ms: float, verdict: str, band: float = 0.03) -> bench.Comparison:
    return bench.Comparison(verdict=verdict, ratio=cand_ms / base_ms, threshold_rel=band, noise_rel=band / 3,
                            p_value=0.001, baseline=_timing(base_ms), candidate=_timing(cand_ms))


def _contract(*weights: float):
    buckets = tuple(ShapeBucket(shapes=as_shape([[16 * 4 ** i, 64]]), dtypes=(), launches=1, device_us=w,
                                weight=w, members=(as_shape([[16 * 4 ** i, 64]]),)) for i, w in enumerate(weights))
    return SimpleNamespace(shapes=ShapeMix(kernel="k", buckets=buckets))


SMALL, LARGE, TINY = "bucket 1 [[16, 64]]", "bucket 2 [[64, 64]]", "bucket 3 [[256, 64]]"


def _red_stage():
    """A heavy small bucket slower, a large one 4x faster (the weighted total faster), a light one slower."""
    return _weighted_result(_contract(0.66, 0.30, 0.04), [
        (SMALL, _comparison(1.0, 1.5, "slower"), 0.66),
        (LARGE, _comparison(20.0, 5.0, "faster"), 0.30),
        (TINY, _comparison(1.0, 2.0, "slower"), 0.04)], accepted=None)


def test_the_stage_data_carries_one_row_per_bucket_with_its_floor_verdict():
    stage = _red_stage()
    assert stage.status == "fail"
    rows = {r["bucket"]: r for r in stage.data["buckets"]}
    assert list(rows) == [SMALL, LARGE, TINY]
    assert rows[SMALL]["floor"] == "broken" and rows[LARGE]["floor"] == "held" and rows[TINY]["floor"] == "no floor"
    assert rows[SMALL]["shape"] == [[16, 64]] and rows[LARGE]["weight"] == 0.30
    assert rows[LARGE]["speedup"] == pytest.approx(4.0) and rows[SMALL]["speedup"] == pytest.approx(1 / 1.5)
    assert rows[SMALL]["baseline_ms"] == 1.0 and rows[SMALL]["candidate_ms"] == 1.5
    assert rows[SMALL]["noise_band"] == 0.03 and rows[SMALL]["verdict"] == "slower"


def test_the_json_is_valid_against_the_gate_schema_whose_floor_words_are_the_judges():
    data = GateResult([_red_stage()]).to_dict()
    schema = envelope.schema("gate")
    jsonschema.validate(data, schema)
    assert tuple(schema["$defs"]["bucket_table"]["items"]["properties"]["floor"]["enum"]) == FLOOR_VERDICTS
    bad = json.loads(json.dumps(data))
    bad["stages"][0]["data"]["buckets"][0]["floor"] = "fine"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_junit_has_one_testcase_per_bucket_saying_weight_and_floor():
    root = ET.fromstring(GateResult([_red_stage()]).to_junit())
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {SMALL, LARGE, TINY, "weighted"}
    failure = cases[SMALL].find("failure")
    # the one-line message (cut at 200 characters) names the weight and the floor verdict first
    assert failure is not None and failure.get("message").startswith(f"{SMALL} (weight 66.0%, floor broken): baseline")
    assert cases[LARGE].find("system-out").text.startswith(f"{LARGE} (weight 30.0%, floor held): ")
    # a light bucket slower is not red: it counts in the weighted total only
    assert cases[TINY].find("failure") is None
    assert cases[TINY].find("system-out").text.startswith(f"{TINY} (weight 4.0%, floor no floor): ")
    assert cases["weighted"].find("failure") is not None


def test_the_gate_text_prints_the_per_bucket_table(capsys):
    from ascendopt.cli.gate import _render

    _render(GateResult([_red_stage()]))
    out = capsys.readouterr().out
    assert "per bucket of the shape mix" in " ".join(out.split())
    cells = {}
    for line in out.splitlines():
        row = [c.strip() for c in line.strip("│ ").split("│")]
        if row[0].startswith("bucket "):
            cells[row[0]] = row[1:]
    assert cells["bucket 1"] == ["[[16, 64]]", "66.0%", "1.00 ms", "1.50 ms", "0.667x", "±3.0%", "slower", "broken"]
    assert cells["bucket 2"][1:] == ["30.0%", "20.00 ms", "5.00 ms", "4.000x", "±3.0%", "faster", "held"]
    assert cells["bucket 3"][-1] == "no floor"


def test_a_heavy_bucket_implausibly_faster_keeps_its_own_outcome_and_is_not_called_light():
    stage = _weighted_result(_contract(0.5, 0.5), [
        (SMALL, _comparison(1.0, 1.0, "same"), 0.5),
        (LARGE, _comparison(20.0, 2.0, "faster"), 0.5)], accepted=None)  # 10x: beyond the implausible bound
    assert stage.status == "implausible"
    check = next(c for c in stage.checks if c.name == LARGE)
    assert not check.passed and "light bucket" not in check.message and "floor held" in check.message
