"""The served-shape mix (``contract.shapes``): bucketing, hidden shapes, YAML round trip, validation, and the
contract's optional ``shapes`` field.

The launch records here are synthetic (made in the tests, no profiler file): they stand for what
``analyze.shapes`` extracts, with distributions chosen to exercise the merge rule.
"""

import dataclasses
import hashlib
import random

import pytest
import yaml
from test_contract import _own

from ascendopt.contract.model import Contract, load, save
from ascendopt.contract.shapes import (
    MAIN_SHARE,
    MAX_BUCKETS,
    ShapeMix,
    ShapeRecord,
    build_mix,
    hidden_shapes,
    load_mix,
)
from ascendopt.errors import ContractError
from ascendopt.workspace import Workspace

HEAD = 128  # head dim: the same in every synthetic shape, a model constant
BF16 = ("DT_BF16", "DT_BF16", "FLOAT")


def _attention(tokens: int, batch: int, launches: int = 1, us: float | None = None) -> ShapeRecord:
    """Synthetic: q and k of (batch, tokens, 16, HEAD) and a (HEAD,) scale, time growing with the tokens."""
    shape = ((batch, tokens, 16, HEAD), (batch, tokens, 16, HEAD), (HEAD,))
    return ShapeRecord(shape, BF16, launches, us if us is not None else float(batch * tokens * launches))


def _served() -> list[ShapeRecord]:
    """Synthetic serving: 300 prefill lengths at batch 1..8 and a heavy decode shape."""
    rng = random.Random(7)
    records = [_attention(rng.randrange(17, 16384), rng.choice([1, 2, 4, 8]), rng.randrange(1, 5)) for _ in range(300)]
    return records + [_attention(1, 64, launches=5000, us=200000.0)]


def test_bucketing_keeps_at_most_16_buckets_covering_95_percent_and_a_tail():
    records = _served()
    mix = build_mix("attn", records, kernel_us=sum(r.device_us for r in records))
    distinct = {r.shapes for r in records}
    assert len(distinct) > MAX_BUCKETS and len(mix.buckets) <= MAX_BUCKETS
    assert mix.main_share >= MAIN_SHARE and mix.buckets[-1].tail and sum(b.tail for b in mix.buckets) == 1
    assert sum(b.weight for b in mix.buckets) == pytest.approx(1.0, abs=1e-5)
    assert sum(b.launches for b in mix.buckets) == sum(r.launches for r in records)
    members = [m for b in mix.buckets for m in b.members]
    assert len(members) == len(set(members)) and set(members) == distinct  # every shape in exactly one bucket
    time_of = {}
    for r in records:
        time_of[r.shapes] = time_of.get(r.shapes, 0.0) + r.device_us
    for b in mix.buckets:  # the representative is the heaviest member
        assert b.shapes == b.members[0] and time_of[b.shapes] == max(time_of[m] for m in b.members)
        assert b.device_us == pytest.approx(sum(time_of[m] for m in b.members), abs=1e-3)
    assert [b.weight for b in mix.buckets if not b.tail] == sorted((b.weight for b in mix.buckets if not b.tail),
                                                                    reverse=True)


def test_few_shapes_stay_exact_and_uncovered_time_lowers_coverage():
    records = [_attention(t, 1) for t in (512, 1024, 4096)]
    mix = build_mix("attn", records, kernel_us=2 * sum(r.device_us for r in records))
    assert [b.shapes for b in mix.buckets] == [r.shapes for r in reversed(records)] and mix.tail is None
    assert mix.coverage == pytest.approx(0.5)


def test_more_dtype_families_than_buckets_still_gives_16():
    records = [ShapeRecord(((64, 64),), (f"T{i}",), 1, 100.0 + i) for i in range(40)]
    mix = build_mix("k", records, kernel_us=sum(r.device_us for r in records))
    assert len(mix.buckets) == MAX_BUCKETS and mix.buckets[-1].tail and mix.tail.launches == 40 - 15
    assert mix.main_share < MAIN_SHARE  # said by describe(): the tail holds more than the rule wants


def _mix() -> ShapeMix:
    records = [_attention(t, b) for t, b in ((512, 1), (1024, 2), (2048, 4), (4096, 8), (8192, 8))]
    return build_mix("attn", records, kernel_us=sum(r.device_us for r in records))


def test_hidden_shapes_take_the_awkward_sizes_keep_constants_and_move_linked_dims_together():
    mix = _mix()
    shapes = hidden_shapes(mix, random.Random(3), 8)
    assert len(shapes) == 8 and len({str(s) for s in shapes}) == 8
    for s in shapes:
        q, k, scale = s
        assert q == k  # T (and B) of q and k are one symbolic dim each
        assert q[2:] == [16, HEAD] and scale == [HEAD]  # constants untouched
        assert 1 <= q[0] <= 8 and 512 <= q[1] <= 8192
    assert shapes[0][0][:2] == [1, 512]  # the smallest of every varying dim
    assert shapes[1][0][:2] == [8, 8192]  # the largest (it fits: the largest served shape has it)
    for s in shapes[2::2]:  # the others, in turn: off every power-of-two tile and not a power of two ...
        assert all(d % 2 == 1 and d > 1 for d in s[0][:2]), s
    # ... and on a tile multiple, one tile level lower each time: T on 64, then on 32 and not 64, then on 16 and
    # not 32 (a change wrong only at one level is met there); B (range 1-8) on 8, then 4 and not 8, then 2 and not 4
    for s, tile, b_tile in zip(shapes[3::2], (64, 32, 16), (8, 4, 2), strict=True):
        assert s[0][1] % tile == 0 and s[0][1] % (2 * tile) != 0, s
        assert s[0][0] % b_tile == 0 and (b_tile == 8 or s[0][0] % (2 * b_tile) != 0), s
    assert all(s[0][0] * s[0][1] <= 8 * 8192 for s in shapes)  # no draw beyond the served element count


def test_hidden_shapes_are_deterministic_per_rng_and_differ_across_seeds():
    mix = _mix()
    assert hidden_shapes(mix, random.Random(11), 6) == hidden_shapes(mix, random.Random(11), 6)
    draws = {str(hidden_shapes(mix, random.Random(seed), 6)[2:]) for seed in range(5)}
    assert len(draws) == 5


def test_hidden_shapes_of_a_single_shape_mix_are_none():
    mix = build_mix("attn", [_attention(512, 1)], kernel_us=512.0)
    assert hidden_shapes(mix, random.Random(0), 4) == []


def test_yaml_round_trip_and_a_hand_written_file_load_through_the_same_model(tmp_path):
    mix = build_mix("attn", _served(), kernel_us=5e6, source={"kind": "profile", "path": "p.csv", "sha256": "a" * 64})
    text = yaml.safe_dump(mix.to_dict(), sort_keys=False)
    assert ShapeMix.from_dict(yaml.safe_load(text), "x.yaml") == mix
    hand = tmp_path / "mix.yaml"
    hand.write_text("kernel: my_kernel\nbuckets:\n"
                    "  - {shapes: [[1, 4096, 16, 128], [128]], dtypes: [bf16, fp32], weight: 0.7}\n"
                    "  - {shapes: [[8, 512, 16, 128], [128]], dtypes: [bf16, fp32], weight: 0.3}\n")
    loaded = load_mix(hand)
    assert loaded.kernel == "my_kernel" and [b.shape for b in loaded.buckets] == [[[1, 4096, 16, 128], [128]],
                                                                                [[8, 512, 16, 128], [128]]]
    assert loaded.source == {"kind": "hand-written", "path": str(hand),
                             "sha256": hashlib.sha256(hand.read_bytes()).hexdigest()}
    assert ShapeMix.from_dict(loaded.to_dict()) == loaded
    assert hidden_shapes(loaded, random.Random(1), 3)[0] == [[1, 512, 16, 128], [128]]


@pytest.mark.parametrize("text, message", [
    ("kernel: k\nbuckets: []\n", "shapes.buckets: expected a non-empty list"),
    ("kernel: k\nbuckets:\n  - {shapes: [[4, 8]], weight: 0.5}\n", "shapes.buckets: weights sum to 0.5, expected 1"),
    ("kernel: k\nbuckets:\n  - {shapes: [[4, -8]], weight: 1}\n", "shapes.buckets[0].shapes[0]: expected a list of "
                                                                  "integers >= 0"),
    ("kernel: k\nbuckets:\n  - {shapes: [[4, 8]]}\n", "shapes.buckets[0].weight: expected a number, found None"),
    ("kernel: k\nbuckets:\n  - {shapes: [[4, 8]], weight: 1, dtypes: [a, b]}\n",
     "shapes.buckets[0].dtypes: 2 dtypes for 1 inputs"),
    ("buckets:\n  - {shapes: [[4, 8]], weight: 1}\n", "shapes.kernel: expected a non-empty string"),
    ("kernel: k\nbuckets: [\n", "not valid YAML at line"),
])
def test_a_bad_mix_file_is_one_line_naming_file_and_field(tmp_path, text, message):
    path = tmp_path / "mix.yaml"
    path.write_text(text)
    with pytest.raises(ContractError) as info:
        load_mix(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)
    assert "\n" not in str(info.value) and info.value.exit_code == 2


def test_a_contract_without_a_mix_judges_one_shape_and_digests_as_before(tmp_path):
    c = _own()
    assert c.judges_one_shape and "shapes" not in c.to_dict()
    ws = Workspace(tmp_path / "ws")
    save(ws, c)
    assert load(ws) == c and "\nshapes:" not in ws.contract_path.read_text()


def test_a_contract_stores_its_mix_and_validates_it_naming_the_field(tmp_path):
    c = dataclasses.replace(_own(), shapes=_mix())
    assert not c.judges_one_shape
    ws = Workspace(tmp_path / "ws")
    save(ws, c)
    back = load(ws)
    assert back == c and back.shapes.buckets[0].shape == c.shapes.buckets[0].shape
    data = c.to_dict()
    data["shapes"]["buckets"][0]["weight"] = -1
    with pytest.raises(ContractError, match=r"^contract.yaml: shapes.buckets\[0\].weight: must be > 0"):
        Contract.from_dict(data)
