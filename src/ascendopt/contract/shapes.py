"""The served-shape mix of a task: which input shapes the target kernel runs on in the model, and how much
of its device time each takes (issue 40, "served-shape contracts").

A kernel is optimized on one shape and served on hundreds. ``freeze --shapes-from PROFILE`` reads the
target kernel's launches from the model's own profile (``analyze.shapes``), merges their distinct shapes
into a few buckets (``build_mix``) and stores the result as the contract's ``shapes`` field; ``freeze
--shapes-file MIX.yaml`` stores a hand-written mix through the same model (``load_mix``). The judge checks
correctness on every bucket's representative shape plus ``hidden_shapes`` drawn from the mix's range, and
weighs its timing verdict by the buckets' weights.

Data only: this module imports nothing of analyze, gate or cli.

Vocabulary (units):

* a *shape* is one dims tuple per kernel input, ``((8, 4096, 16, 128), (128,))``; an input without dims
  (a scalar, or an optional input the call left out: an empty field of ``Input Shapes``) is ``()``.
  What a workload's ``inputs(seed, shape)`` receives is the same as lists: ``[[8, 4096, 16, 128], [128]]``.
* ``device_us``: summed device time of the launches, microseconds; ``weight``: a bucket's share of the
  mix's device time (0..1, the weights sum to 1).
* ``coverage``: the share of the kernel's profiled device time the mix covers (launches whose profile
  row recorded no shape are outside the mix).

Merge rule (``build_mix``). Launches are first summed per distinct (shape, dtypes). If at most
``MAX_BUCKETS`` distinct shapes remain, each is a bucket. Otherwise, if the heaviest ``MAX_BUCKETS - 1``
distinct shapes hold at least ``MAIN_SHARE`` of the device time, they stay exact and the light rest is
merged into one *tail* bucket (kept, so no served shape is dropped). Otherwise neighbouring shapes are
merged on a log2 scale: two shapes share a bucket when they have the same dtypes and ranks and every dim
falls in the same bin of ``octaves`` powers of two (``floor(log2(dim) / octaves)``; a dim that is the same
in every shape never splits a bucket, so in effect only the varying dims are binned), with the same test
at each width of ``MERGE_OCTAVES``, finest first. A bucket's representative is its heaviest member (most
device time).

Example: a mix as the engine uses it::

    import random, secrets
    mix = contract.shapes                      # None: the contract judges one shape
    for bucket in mix.buckets:
        args = workload_module.inputs(seed, bucket.shape)   # [[8, 4096, 16, 128], [128]]
        ...                                     # check, then time; weigh by bucket.weight
    rng = random.Random(secrets.randbits(64))   # unpredictable per command
    for shape in hidden_shapes(mix, rng, k=4):  # smallest, largest, awkward sizes in between
        args = workload_module.inputs(seed, shape)
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from ascendopt.errors import ContractError

Dims = tuple[int, ...]
Shape = tuple[Dims, ...]

# Buckets in a mix, tail included. Every bucket is checked for correctness and timed by the gate, so this
# bounds a gate's cost; 16 still separates the regimes real models show (decode vs prefill, a few batch
# sizes, a few sequence-length octaves).
MAX_BUCKETS = 16
# Share of the mix's device time the buckets other than the tail must hold: the timing verdict is weighed
# by bucket, and the tail's representative stands for shapes it resembles less, so it may carry little.
MAIN_SHARE = 0.95
# Bin widths (in powers of two) ``build_mix`` tries, finest first; 64 octaves put every positive dim of
# one dtype/rank family into a single bin, so the last step leaves one bucket per family.
MERGE_OCTAVES = (1, 2, 3, 4, 6, 8, 16, 64)
# Hand-written weights may be rounded (three buckets of 0.333); their sum must be 1 within this.
WEIGHT_SUM_TOLERANCE = 1e-3
# Digits weights and coverage are stored with: enough to sum to 1 within 1e-5 over MAX_BUCKETS buckets.
STORED_DIGITS = 6
SOURCE_KINDS = ("profile", "hand-written")
# Draws ``hidden_shapes`` makes per shape asked for before it returns fewer (a narrow range has few shapes).
HIDDEN_DRAWS_PER_SHAPE = 20


class ShapeRecord(NamedTuple):
    """The launches of one distinct (shape, dtypes) of a kernel, as an extraction sums them."""

    shapes: Shape
    dtypes: tuple[str, ...]
    launches: int
    device_us: float


@dataclass(frozen=True)
class ShapeBucket:
    """One bucket of a mix: a representative shape standing for the distinct shapes merged into it.

    ``shapes``: the representative (the heaviest member), one dims tuple per input. ``dtypes``: its inputs'
    dtypes as the profile names them (``DT_BF16``, ``float``), possibly empty in a hand-written mix.
    ``launches``: launches of all members; ``device_us``: their device time (us); ``weight``: share of the
    mix's device time (0..1). ``members``: the distinct shapes merged, heaviest first (the representative
    first). ``tail``: the bucket of the light remainder (``build_mix``).
    """

    shapes: Shape
    dtypes: tuple[str, ...]
    launches: int
    device_us: float
    weight: float
    members: tuple[Shape, ...]
    tail: bool = False

    @property
    def shape(self) -> list[list[int]]:
        """The representative as lists, what a workload's ``inputs(seed, shape)`` receives."""
        return [list(d) for d in self.shapes]


@dataclass(frozen=True)
class ShapeMix:
    """The served-shape mix of one kernel (the contract's ``shapes`` field).

    ``kernel``: the kernel filter the launches were selected with (or the hand-written file's ``kernel``).
    ``buckets``: heaviest first, the tail (if any) last. ``source``: ``{"kind": "profile" | "hand-written",
    "path": str, "sha256": hex digest of the file}``. ``kernel_us``: the kernel's profiled device time (us;
    0 for a hand-written mix). ``coverage``: share of ``kernel_us`` the buckets hold (1.0 hand-written).
    """

    kernel: str
    buckets: tuple[ShapeBucket, ...]
    source: dict[str, str] = field(default_factory=dict)
    kernel_us: float = 0.0
    coverage: float = 1.0

    @property
    def tail(self) -> ShapeBucket | None:
        return next((b for b in self.buckets if b.tail), None)

    @property
    def main_share(self) -> float:
        """Share of the mix's device time in the buckets other than the tail (0..1)."""
        return sum(b.weight for b in self.buckets if not b.tail)

    @property
    def distinct_shapes(self) -> int:
        return sum(len(b.members) for b in self.buckets)

    def to_dict(self) -> dict[str, Any]:
        """Plain YAML/JSON data (lists, no tuples); ``from_dict`` reads it back."""
        return {
            "kernel": self.kernel,
            "source": dict(self.source),
            "kernel_us": round(self.kernel_us, 3),
            "coverage": round(self.coverage, STORED_DIGITS),
            "buckets": [{"shapes": b.shape, "dtypes": list(b.dtypes), "launches": b.launches,
                         "device_us": round(b.device_us, 3), "weight": round(b.weight, STORED_DIGITS),
                         "members": [[list(d) for d in m] for m in b.members], "tail": b.tail}
                        for b in self.buckets],
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "contract.yaml", prefix: str = "shapes") -> ShapeMix:
        """Validate raw data (a stored mix, or a hand-written one where only ``kernel`` and each bucket's
        ``shapes`` and ``weight`` are required). Errors name ``source`` and the dotted field:
        ``mix.yaml: shapes.buckets[1].weight: must be > 0``."""
        check = _Check(source)
        data = check.mapping(data, prefix)
        kernel = check.text(data.get("kernel"), f"{prefix}.kernel")
        raw_buckets = data.get("buckets")
        if not isinstance(raw_buckets, list) or not raw_buckets:
            raise check.fail(f"{prefix}.buckets", f"expected a non-empty list of buckets, found {raw_buckets!r}")
        if len(raw_buckets) > MAX_BUCKETS:
            raise check.fail(f"{prefix}.buckets", f"{len(raw_buckets)} buckets; at most {MAX_BUCKETS} (MAX_BUCKETS)")
        buckets = tuple(_bucket(check, item, f"{prefix}.buckets[{i}]") for i, item in enumerate(raw_buckets))
        total = sum(b.weight for b in buckets)
        if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
            raise check.fail(f"{prefix}.buckets", f"weights sum to {total:.6g}, expected 1")
        if sum(b.tail for b in buckets) > 1:
            raise check.fail(f"{prefix}.buckets", "more than one tail bucket")
        src = data.get("source") or {}
        src = check.mapping(src, f"{prefix}.source")
        if src:
            check.text(src.get("kind"), f"{prefix}.source.kind", choices=SOURCE_KINDS)
            check.text(src.get("path"), f"{prefix}.source.path")
            digest = check.text(src.get("sha256"), f"{prefix}.source.sha256")
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise check.fail(f"{prefix}.source.sha256", "not a sha256 hex digest")
        kernel_us = check.number(data.get("kernel_us", 0.0), f"{prefix}.kernel_us", allow_zero=True)
        coverage = check.number(data.get("coverage", 1.0), f"{prefix}.coverage")
        if coverage > 1.0:
            raise check.fail(f"{prefix}.coverage", f"{coverage:g} is above 1 (a share of the kernel's time)")
        return cls(kernel=kernel, buckets=buckets, source={k: str(v) for k, v in src.items()},
                   kernel_us=kernel_us, coverage=coverage)


def _bucket(check: _Check, item: Any, path: str) -> ShapeBucket:
    item = check.mapping(item, path)
    shapes = check.shape(item.get("shapes"), f"{path}.shapes")
    dtypes = item.get("dtypes", [])
    if not isinstance(dtypes, list) or not all(isinstance(d, str) and d for d in dtypes):
        raise check.fail(f"{path}.dtypes", f"expected a list of dtype names, found {dtypes!r}")
    if dtypes and len(dtypes) != len(shapes):
        raise check.fail(f"{path}.dtypes", f"{len(dtypes)} dtypes for {len(shapes)} inputs")
    launches = item.get("launches", 0)
    if isinstance(launches, bool) or not isinstance(launches, int) or launches < 0:
        raise check.fail(f"{path}.launches", f"expected an integer >= 0, found {launches!r}")
    members_raw = item.get("members", [item.get("shapes")])
    if not isinstance(members_raw, list) or not members_raw:
        raise check.fail(f"{path}.members", f"expected a non-empty list of shapes, found {members_raw!r}")
    members = tuple(check.shape(m, f"{path}.members[{j}]") for j, m in enumerate(members_raw))
    if shapes not in members:
        raise check.fail(f"{path}.members", "does not hold the representative shape")
    tail = item.get("tail", False)
    if not isinstance(tail, bool):
        raise check.fail(f"{path}.tail", f"expected true or false, found {tail!r}")
    return ShapeBucket(shapes=shapes, dtypes=tuple(dtypes), launches=launches,
                       device_us=check.number(item.get("device_us", 0.0), f"{path}.device_us", allow_zero=True),
                       weight=check.number(item.get("weight"), f"{path}.weight"), members=members, tail=tail)


class _Check:
    """Validation helpers whose errors read ``<source>: <dotted.field>: <problem>`` (exit 2)."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str, problem: str) -> ContractError:
        return ContractError(f"{self.source}: {path}: {problem}")

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected a mapping, found {type(value).__name__}")
        return value

    def text(self, value: Any, path: str, *, choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"expected a non-empty string, found {value!r}")
        if choices and value not in choices:
            raise self.fail(path, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def number(self, value: Any, path: str, *, allow_zero: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(path, f"expected a number, found {value!r}")
        if value < 0 or (value == 0 and not allow_zero):
            raise self.fail(path, "must be >= 0" if allow_zero else "must be > 0")
        return float(value)

    def shape(self, value: Any, path: str) -> Shape:
        """``[[8, 128], [], [128]]`` -> a Shape; each input a list of integers >= 0."""
        if not isinstance(value, list) or not value:
            raise self.fail(path, f"expected a list with one list of dims per input, found {value!r}")
        out = []
        for i, dims in enumerate(value):
            if not isinstance(dims, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                     for d in dims):
                raise self.fail(f"{path}[{i}]", f"expected a list of integers >= 0, found {dims!r}")
            out.append(tuple(dims))
        return tuple(out)


def load_mix(path: str | Path) -> ShapeMix:
    """A hand-written mix file (YAML: ``kernel`` and ``buckets``, optionally under a top-level ``shapes``)
    as a ShapeMix whose source is the file and its sha256. ContractError (exit 2) naming the file and field."""
    import yaml

    path = Path(path)
    try:
        raw = path.read_bytes()
        data = yaml.safe_load(raw.decode("utf-8"))
    except OSError as exc:
        raise ContractError(f"{path}: cannot read ({(exc.strerror or type(exc).__name__).lower()})") from None
    except UnicodeDecodeError:
        raise ContractError(f"{path}: not a text file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ContractError(f"{path}: not valid YAML" + (f" at line {mark.line + 1}" if mark else "")) from None
    if isinstance(data, Mapping) and "shapes" in data and "buckets" not in data:
        data = data["shapes"]
    mix = ShapeMix.from_dict(data, source=str(path))
    return replace(mix, source={"kind": "hand-written", "path": str(path),
                                "sha256": hashlib.sha256(raw).hexdigest()})


# -- building a mix from a profile's launches -------------------------------------------------------------


def _bin(dim: int, octaves: float) -> int:
    """The log2 bin of width ``octaves`` holding ``dim``; 0 has a bin of its own (-1)."""
    return -1 if dim <= 0 else math.floor(math.log2(dim) / octaves)


def _group(records: Sequence[ShapeRecord], octaves: float | None) -> list[list[ShapeRecord]]:
    """Records grouped by dtypes, ranks and the log2 bin of every dim (``octaves`` None: exact shapes);
    groups heaviest first, members heaviest first (ties: more launches, then the shape, for determinism)."""
    groups: dict[tuple, list[ShapeRecord]] = {}
    for r in records:
        if octaves is None:
            key: tuple = (r.dtypes, r.shapes)
        else:
            key = (r.dtypes, tuple(len(d) for d in r.shapes), tuple(tuple(_bin(x, octaves) for x in d)
                                                                    for d in r.shapes))
        groups.setdefault(key, []).append(r)
    order = [sorted(g, key=_heaviest) for g in groups.values()]
    return sorted(order, key=lambda g: (-sum(r.device_us for r in g), -sum(r.launches for r in g), g[0].shapes))


def _heaviest(r: ShapeRecord) -> tuple:
    return (-r.device_us, -r.launches, r.shapes, r.dtypes)


def _main_count(groups: list[list[ShapeRecord]], total: float) -> int:
    """How many of the heaviest groups it takes to hold ``MAIN_SHARE`` of ``total``."""
    held = 0.0
    for n, g in enumerate(groups, 1):
        held += sum(r.device_us for r in g)
        if held >= MAIN_SHARE * total - 1e-9:
            return n
    return len(groups)


def _make_bucket(records: Sequence[ShapeRecord], total_us: float, *, tail: bool = False) -> ShapeBucket:
    members = sorted(records, key=_heaviest)
    us = sum(r.device_us for r in members)
    rep = members[0]
    # rounded as stored, so a mix built here equals the one its contract reads back
    return ShapeBucket(shapes=rep.shapes, dtypes=rep.dtypes, launches=sum(r.launches for r in members),
                       device_us=round(us, 3), weight=round(us / total_us, STORED_DIGITS),
                       members=tuple(dict.fromkeys(r.shapes for r in members)),
                       tail=tail)


def merge_records(records: Iterable[ShapeRecord]) -> list[ShapeRecord]:
    """Records summed per distinct (shape, dtypes)."""
    summed: dict[tuple[Shape, tuple[str, ...]], list[float]] = {}
    for r in records:
        acc = summed.setdefault((r.shapes, r.dtypes), [0, 0.0])
        acc[0] += r.launches
        acc[1] += r.device_us
    return [ShapeRecord(s, d, int(n), us) for (s, d), (n, us) in summed.items()]


def build_mix(kernel: str, records: Iterable[ShapeRecord], *, kernel_us: float,
              source: Mapping[str, str] | None = None) -> ShapeMix:
    """Bucket a kernel's launches (``records``) into a mix by the merge rule of the module docstring.

    ``kernel_us``: the kernel's whole profiled device time (us), launches without a recorded shape
    included, so ``coverage`` says how much of it the mix holds. ContractError when no record has time.
    """
    records = [r for r in merge_records(records) if r.launches > 0]
    total = sum(r.device_us for r in records)
    if not records or total <= 0:
        raise ContractError(f"kernel {kernel!r}: no launch with a recorded input shape and device time")
    for octaves in (None, *MERGE_OCTAVES):  # exact shapes first, then ever wider log2 bins
        groups = _group(records, octaves)
        if len(groups) <= MAX_BUCKETS:
            main = len(groups)  # every group is a bucket: no tail needed
            break
        main = _main_count(groups, total)
        if main < MAX_BUCKETS:
            break
    else:  # more dtype/rank families than buckets: the tail holds more than 1 - MAIN_SHARE
        main = MAX_BUCKETS - 1
    buckets = [_make_bucket(g, total) for g in groups[:main]]
    rest = [r for g in groups[main:] for r in g]
    if rest:
        buckets.append(_make_bucket(rest, total, tail=True))
    covered = min(1.0, total / kernel_us) if kernel_us > 0 else 1.0
    return ShapeMix(kernel=kernel, buckets=tuple(buckets), source=dict(source or {}),
                    kernel_us=round(float(max(kernel_us, total)), 3), coverage=round(covered, STORED_DIGITS))


# -- hidden shapes ------------------------------------------------------------------------------------------


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _awkward(lo: int, hi: int, rng: random.Random) -> int:
    """A size in ``[lo, hi]`` off every tile multiple and power of two: odd (no multiple of 2, 4, ..., any
    power-of-two tile) and above 1 (the one odd power of two); ``lo`` or ``hi`` when the range holds none."""
    first = max(3, lo + 1 - lo % 2)  # the smallest odd size >= lo, 1 excluded
    if first > hi:
        return rng.choice([lo, hi])
    return first + 2 * rng.randrange((hi - first) // 2 + 1)


def _aligned(lo: int, hi: int, rng: random.Random, level: int = 0) -> int:
    """A size in ``[lo, hi]`` ON a tile multiple, at tile level ``level``: of the powers of two up to 64 that the
    range holds a multiple of, the ``level``-th from the largest (cycling), and an odd multiple of it where the
    range holds one, so that the size is a multiple of that tile and of no larger one (a change wrong only at
    multiples of 32 that are not multiples of 64 is met at level 1), drawn at random."""
    tiles = [t for t in (64, 32, 16, 8, 4, 2) if -(-max(lo, 1) // t) * t <= hi]
    if not tiles:
        return rng.choice([lo, hi])
    tile = tiles[level % len(tiles)]
    first = -(-max(lo, 1) // tile)  # the smallest multiple's factor
    factors = range(first, hi // tile + 1)
    odd = [m for m in (first, first + 1) if m % 2 and m * tile <= hi]
    if odd:  # an odd factor: drawn among the odd ones
        return tile * (odd[0] + 2 * rng.randrange((hi // tile - odd[0]) // 2 + 1))
    return tile * rng.choice(factors)


def _elements(shape: Shape) -> int:
    return sum(math.prod(d) for d in shape)


def hidden_shapes(mix: ShapeMix, rng: random.Random, k: int) -> list[list[list[int]]]:
    """``k`` shapes from the mix's range that the buckets do not show, as ``inputs(seed, shape)`` takes them.

    The template is the heaviest bucket: hidden shapes have its ranks (and dtypes, ``mix.buckets[0].dtypes``).
    Observed shapes are the members of every bucket with the template's ranks and dtypes. Only the dims
    that vary across them change; a dim equal in all (a model constant, e.g. head dim 128) stays. Dims whose
    values are equal in every observed shape are one symbolic dim (T in q and k) and change together.
    Each symbolic dim ranges over [its smallest, its largest observed value]:

    * the first shape has every symbolic dim at its smallest, the second at its largest;
    * the others take, per symbolic dim, in turn a size off every tile multiple and power of two (``_awkward``)
      and a size on a tile multiple between the buckets (``_aligned``), one tile level lower at each such draw
      (a multiple of 64, then of 32 and not 64, then of 16 and not 32).

    No hidden shape has more elements (summed over inputs) than the largest observed one, so it fits where
    the served shapes fit: a larger draw is scaled down. Deterministic for a given ``rng`` state (seed it
    from ``secrets`` to make it unpredictable per command). The smallest and largest may equal a bucket's
    representative; the shapes returned are distinct, fewer than ``k`` (none when nothing varies) when the
    range holds fewer.
    """
    template = mix.buckets[0]
    ranks = tuple(len(d) for d in template.shapes)
    observed = list(dict.fromkeys(m for b in mix.buckets if b.dtypes == template.dtypes for m in b.members
                                  if tuple(len(d) for d in m) == ranks))
    positions = [(i, j) for i, r in enumerate(ranks) for j in range(r)]
    linked: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for i, j in positions:
        values = tuple(s[i][j] for s in observed)
        if len(set(values)) > 1:
            linked.setdefault(values, []).append((i, j))
    if not linked or k <= 0:
        return []
    symbols = [(min(values), max(values), where) for values, where in linked.items()]
    cap = max(_elements(s) for s in observed)
    seen: set[Shape] = set()
    out: list[Shape] = []

    def place(sizes: list[int]) -> Shape:
        dims = [list(d) for d in template.shapes]
        for (_, _, where), size in zip(symbols, sizes, strict=True):
            for i, j in where:
                dims[i][j] = size
        return tuple(tuple(d) for d in dims)

    def fitted(sizes: list[int], *, odd: bool) -> list[int]:
        # scale the symbolic dims down together until the shape fits the largest observed element count;
        # an awkward draw stays odd (its point: off every tile multiple)
        for _ in range(64):
            over = _elements(place(sizes)) / cap if cap else 1.0
            if over <= 1.0:
                break
            factor = over ** (-1.0 / len(sizes))
            scaled = [max(lo, min(int(s * factor), s - 1)) for (lo, _, _), s in zip(symbols, sizes, strict=True)]
            sizes = [s - 1 if odd and s % 2 == 0 and s - 1 >= max(lo, 3) else s
                     for (lo, _, _), s in zip(symbols, scaled, strict=True)]
        return sizes

    plans = [[lo for lo, _, _ in symbols], fitted([hi for _, hi, _ in symbols], odd=False)]
    aligned = 0  # aligned draws so far: each at the next tile level
    for _ in range(k * HIDDEN_DRAWS_PER_SHAPE):
        if len(out) >= k:
            break
        if plans:
            sizes = plans.pop(0)
        elif len(out) % 2 == 0:  # off every tile multiple and on one, in turn
            sizes = fitted([_awkward(lo, hi, rng) for lo, hi, _ in symbols], odd=True)
        else:  # on a tile multiple, one tile level lower each time (64, then 32 but not 64, ...)
            sizes = fitted([_aligned(lo, hi, rng, aligned) for lo, hi, _ in symbols], odd=False)
            aligned += 1
        shape = place(sizes)
        if shape not in seen:
            seen.add(shape)
            out.append(shape)
    return [[list(d) for d in s] for s in out]


def bucket_name(i: int, bucket: ShapeBucket) -> str:
    """Bucket ``i`` (0-based) as timing cases, baselines and messages name it: ``bucket 2 [[1, 4096]]``."""
    return f"bucket {i + 1} {bucket.shape}"


def describe(mix: ShapeMix) -> str:
    """One line for people: buckets, distinct shapes, coverage (``freeze`` prints it)."""
    tail = mix.tail
    return (f"{len(mix.buckets)} bucket(s) of {mix.distinct_shapes} distinct shape(s) of {mix.kernel!r}"
            + (f" (a tail bucket of {len(tail.members)} shape(s) holds {100 * tail.weight:.1f} %)" if tail else "")
            + (f"; covers {100 * mix.coverage:.1f} % of its profiled device time "
               f"({mix.kernel_us:.1f} us)" if mix.source.get("kind") == "profile" else ""))


def as_shape(dims: Sequence[Sequence[int]]) -> Shape:
    """``[[8, 128], [128]]`` -> ``((8, 128), (128,))``."""
    return tuple(tuple(int(x) for x in d) for d in dims)
