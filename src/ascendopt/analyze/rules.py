"""Bottleneck classification: rules as data (``configs/rules.yaml``), findings with evidence.

A pipe class fires when any of its checks holds (canonical column >= named threshold). A kernel's
``bound`` is the fired pipe class with the largest value / threshold (ratios overlap and can sum
above 1, so classes are never shares of a total; docs/profiler-formats.md §6.1). When
no pipe class fires (no pipe reaches its saturation bound), a pipe that clearly leads (its ratio at least
``dominant_pipe_lead`` times every other pipe's) is still named: the kernel's ``bound`` is that pipe's
class, with ``saturated`` false; otherwise the kernel is latency-bound (short) or has no dominant pipe
(long). Without counters it is not classified. Core-use checks (NPU only) add findings of their own: a vector
kernel on the cube core count, fewer blocks than cores, a partial last wave, a grid over 65535.
Every finding carries the column, value, threshold name, threshold value, its origin and a sentence.

Levers depend on the kernel's kind (``kernel_kind``): core (cube / vector / mix), family (matmul / copy /
attention / conv / other) and maker (a CANN vendor op, a Triton kernel, or unknown), so a matmul never
gets gate-stride advice and a cube-only kernel no vector-core advice. Thresholds may differ per family
(the advisor's cube_operators thresholds for matmuls). Two fired classes of different nature (compute /
memory) within ``near_tie_margin`` of each other make the ``compute_memory_tie`` class.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ascendopt.console import finite_or_none
from ascendopt.errors import UsageError

NPU_KINDS = ("npu", "msprof", "msprof-op")
# msprof-analyze vector_operators "total": vec + MTE2 + MTE3 of the vector core, one derived column
VECTOR_PIPE_SUM = ("vec_ratio", "vector_mte2_ratio", "mte3_ratio")
PIPE_COLUMNS = ("mac_ratio", "vec_ratio", "cube_scalar_ratio", "vector_scalar_ratio", "mte1_ratio",
                "cube_mte2_ratio", "vector_mte2_ratio", "mte3_ratio", "fixpipe_ratio", "dram_ratio", "l2_ratio")


@dataclass(frozen=True)
class Threshold:
    name: str
    value: float | None  # None: not set, the checks using it are not evaluated
    origin: str


@dataclass(frozen=True)
class Check:
    column: str
    threshold: Threshold
    families: tuple[str, ...] = ()  # evaluated only for kernels of these families (empty: all)
    except_families: tuple[str, ...] = ()

    def applies(self, family: str) -> bool:
        return (not self.families or family in self.families) and family not in self.except_families


@dataclass(frozen=True)
class Lever:
    """One piece of advice, limited to kernels of some cores / families / makers and to profiles of some
    backends (npu | cuda | cpu; empty: any): advice must be something the profile's backend can follow."""

    text: str
    origin: str
    cores: tuple[str, ...] = ()
    families: tuple[str, ...] = ()
    makers: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()

    def fits(self, kind: KernelKind | None, backend: str | None = None) -> bool:
        """Whether the lever applies to a kernel of ``kind`` on a profile of ``backend`` (None: not known)."""
        if self.backends and backend is not None and backend not in self.backends:
            return False
        return kind is None or all(not allowed or value in allowed for allowed, value in
                                   ((self.cores, kind.core), (self.families, kind.family), (self.makers, kind.maker)))


@dataclass(frozen=True)
class Rule:
    name: str
    label: str
    checks: tuple[Check, ...]
    levers: tuple[Lever, ...]
    backends: tuple[str, ...]
    nature: str = "other"  # compute | memory | other
    secondary: bool = False  # never leads while another class fired


@dataclass(frozen=True)
class KernelKind:
    """What a kernel is, as far as its profiler row tells.

    ``core``: cube | vector | mix | ai_cpu | other. ``family``: matmul | attention | conv | copy | other.
    ``maker``: vendor (a CANN op) | triton (a Triton-style kernel) | unknown. ``why``: the sentence.
    """

    core: str
    family: str
    maker: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"core": self.core, "family": self.family, "maker": self.maker, "why": self.why}


@dataclass(frozen=True)
class RuleSet:
    thresholds: dict[str, Threshold]
    pipe_rules: tuple[Rule, ...]
    derived: dict[str, Rule]  # classes decided in code (checks empty)
    communication: re.Pattern = re.compile(r"^hcom_|hccl", re.I)
    communication_origin: str = ""
    families: tuple[tuple[str, re.Pattern, str], ...] = ()  # (family, pattern on op type / name, origin)

    def value(self, name: str) -> float | None:
        return self.thresholds[name].value

    def rule(self, name: str) -> Rule:
        for r in self.pipe_rules:
            if r.name == name:
                return r
        return self.derived[name]


@dataclass
class Finding:
    """One class that fired for one kernel, with the evidence that made it fire."""

    cls: str
    label: str
    evidence: list[dict[str, Any]]  # [{"column", "value", "op", "threshold", "threshold_name", "origin", "text"}]
    levers: list[str]
    lever_origins: list[str] = field(default_factory=list)  # the origin of each lever, same order

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.cls, "label": self.label, "evidence": self.evidence, "levers": self.levers,
                "lever_origins": self.lever_origins}


@dataclass
class Classification:
    """``bound``: the class that leads. ``dominant``: the leading pipe (``dominant_pipe``), None without
    counters. ``saturated``: whether the bound's pipe reaches its saturation bound (True when a pipe class
    fired, False when a pipe only leads, None for classes that are not a pipe). ``label``: the bound's label
    when it differs from the class's (a pipe that leads below its bound)."""

    bound: str
    findings: list[Finding] = field(default_factory=list)
    kind: KernelKind | None = None
    dominant: dict[str, Any] | None = None
    saturated: bool | None = None
    label: str | None = None

    @property
    def evidence(self) -> dict[str, Any]:
        """{column: value} of every check that fired (the JSON ``evidence`` of a kernel)."""
        out: dict[str, Any] = {}
        for f in self.findings:
            for e in f.evidence:
                out.setdefault(e["column"], e["value"])
        return out

    @property
    def levers(self) -> list[str]:
        return list(dict.fromkeys(lever for f in self.findings for lever in f.levers))


def _fail(path: str, message: str) -> UsageError:
    return UsageError(f"{path}: {message}", hint="fix configs/rules.yaml or set ASCENDOPT_CONFIG_DIR")


def parse_rules(data: Mapping[str, Any], path: str = "rules.yaml") -> RuleSet:
    """Validate the YAML mapping of ``configs/rules.yaml``; errors name the field."""
    if not isinstance(data, Mapping) or data.get("schema") != 1:
        raise _fail(path, "schema: expected 1")
    thresholds = {}
    for name, spec in (data.get("thresholds") or {}).items():
        if not isinstance(spec, Mapping) or "value" not in spec or not spec.get("origin"):
            raise _fail(path, f"thresholds -> {name}: needs value and origin")
        value = spec["value"]
        if value is not None and not isinstance(value, (int, float)):
            raise _fail(path, f"thresholds -> {name} -> value: expected a number or null, found {value!r}")
        thresholds[name] = Threshold(name, None if value is None else float(value), str(spec["origin"]))

    def lever(item: Any, where: str, origin: str) -> Lever:
        if isinstance(item, str):
            return Lever(item, origin)
        if not isinstance(item, Mapping) or not item.get("text"):
            raise _fail(path, f"{where}: expected text or {{text, origin, cores, families, makers, backends}}")
        return Lever(str(item["text"]), str(item.get("origin") or origin),
                     *(tuple(map(str, item.get(k) or ())) for k in ("cores", "families", "makers", "backends")))

    def rule(name: str, spec: Mapping[str, Any], section: str) -> Rule:
        checks = []
        for i, c in enumerate(spec.get("checks") or []):
            thr = c.get("threshold") if isinstance(c, Mapping) else None
            if thr not in thresholds or not c.get("column"):
                raise _fail(path, f"{section} -> {name} -> checks[{i}]: unknown threshold {thr!r} or no column")
            checks.append(Check(str(c["column"]), thresholds[thr], tuple(c.get("families") or ()),
                                tuple(c.get("except_families") or ())))
        levers = spec.get("levers") or []
        if not levers:
            raise _fail(path, f"{section} -> {name}: no levers")
        origin = str(spec.get("origin") or f"rules.yaml {section} -> {name}")
        nature = str(spec.get("nature", "other"))
        if nature not in ("compute", "memory", "other"):
            raise _fail(path, f"{section} -> {name} -> nature: expected compute, memory or other, found {nature!r}")
        return Rule(name, str(spec.get("label", name)), tuple(checks),
                    tuple(lever(x, f"{section} -> {name} -> levers[{i}]", origin) for i, x in enumerate(levers)),
                    tuple(spec.get("backends") or ()), nature, bool(spec.get("secondary", False)))

    pipe = tuple(rule(n, s, "classes") for n, s in (data.get("classes") or {}).items())
    derived = {n: rule(n, s, "derived_classes") for n, s in (data.get("derived_classes") or {}).items()}
    needed = {"latency_bound", "no_dominant_pipe", "no_counters", "vector_on_cube_cores", "core_underuse",
              "tail_wave", "grid_cap", "fallback_unfused", "compute_memory_tie", "shape_bound"}
    missing = needed - set(derived)
    if missing:
        raise _fail(path, f"derived_classes: missing {', '.join(sorted(missing))}")
    for name in ("short_kernel_us", "grid_cap", "no_bound_ratio", "dominant_pipe_lead", "fallback_target_share",
                 "fallback_min_small_kernels", "near_tie_margin", "aicpu_long_us", "matmul_axis_align",
                 "attention_axis_align", "fusion_min_kernels", "host_bound_busy_fraction"):
        if name not in thresholds or thresholds[name].value is None:
            raise _fail(path, f"thresholds: missing {name}")
    comm = data.get("communication") or {}
    families = []
    try:
        pattern = re.compile(str(comm.get("pattern") or r"^hcom_|hccl"), re.I)
        for fam, spec in (data.get("kinds") or {}).items():
            families.append((str(fam), re.compile(str(spec["pattern"]), re.I), str(spec.get("origin", ""))))
    except (re.error, KeyError, TypeError) as exc:
        raise _fail(path, f"communication / kinds: bad pattern ({exc})") from None
    return RuleSet(thresholds, pipe, derived, pattern, str(comm.get("origin", "")), tuple(families))


@lru_cache(maxsize=4)
def _cached(config_dir: str) -> RuleSet:
    from ascendopt.device.config import load_config

    return parse_rules(load_config("rules"), f"{config_dir}/rules.yaml")


def load_rules() -> RuleSet:
    from ascendopt.device.config import config_dir

    return _cached(str(config_dir()))


_COLUMN_WORDS = {
    "mac_ratio": "cube MAC ratio", "vec_ratio": "vector ratio", "cube_scalar_ratio": "cube scalar ratio",
    "vector_scalar_ratio": "vector scalar ratio", "mte1_ratio": "MTE1 ratio", "cube_mte2_ratio": "cube MTE2 ratio",
    "vector_mte2_ratio": "vector MTE2 ratio", "mte3_ratio": "MTE3 ratio", "fixpipe_ratio": "fixpipe ratio",
    "vector_pipe_sum_ratio": "vec + MTE2 + MTE3 ratio sum", "dram_ratio": "DRAM throughput",
    "l2_ratio": "L2 throughput", "avg_us": "mean duration", "block_dim": "block dim",
    "mix_block_dim": "mix block dim", "ub_bw_vector_gbs": "UB vector bandwidth",
}
_OP_WORDS = {">=": "reaches", ">": "is over", "<": "is below", "==": "equals"}


MIN_DECIMALS = 3  # ratios are shown to 3 decimals, more only where needed to tell a value from its bound
JSON_DECIMALS = 6  # the JSON evidence keeps at least this many
MAX_DECIMALS = 12


def decimals_against(value: float, limit: float | None, minimum: int = MIN_DECIMALS) -> int:
    """The fewest decimals (at least ``minimum``) at which ``value`` rounds to a number on the same side of
    ``limit`` as the value itself: 0.9496 against 0.95 is shown as 0.9496, never as "0.950 is below 0.95".

    The one rule for every number printed beside the bound it was compared with: the comparison is made
    on the exact value, and the value is printed with enough digits to show the difference.
    """
    if limit is None or not math.isfinite(value):
        return minimum
    for digits in range(minimum, MAX_DECIMALS + 1):
        shown = round(value, digits)
        if (shown >= limit) == (value >= limit) and (shown == limit) == (value == limit):
            return digits
    return MAX_DECIMALS


def shown_against(value: float, limit: float | None, minimum: int = MIN_DECIMALS) -> str:
    """``value`` as text with ``decimals_against`` digits (integers as integers)."""
    if float(value).is_integer():
        return f"{value:g}"
    return f"{value:.{decimals_against(float(value), limit, minimum)}f}"


def sentence(column: str, value: float, op: str, thr: Threshold) -> str:
    """One evidence line as a sentence: "vector MTE2 ratio 0.842 reaches the bound 0.7"."""
    what = column_words(column)
    shown = shown_against(float(value), thr.value)
    limit = f"{thr.value:g}"
    if op == "% !=":
        return f"{what} {shown} is not a multiple of the {limit} {thr.name.replace('_', ' ')}"
    if op == "==" and thr.name.endswith("cores"):
        return f"{what} {shown} equals the {limit} {thr.name.replace('_', ' ')}"
    if op == "<" and thr.name.endswith("cores"):
        return f"{what} {shown} is below the {limit} {thr.name.replace('_', ' ')}"
    return f"{what} {shown} {_OP_WORDS.get(op, op)} the bound {limit}"


def column_words(column: str) -> str:
    """A canonical column in words: ``cube_mte2_ratio`` -> "cube MTE2 ratio"."""
    return _COLUMN_WORDS.get(column, column.replace("_", " "))


def _evidence(column: str, value: float, thr: Threshold, op: str = ">=") -> dict[str, Any]:
    return {"column": column, "value": round(float(value), decimals_against(float(value), thr.value, JSON_DECIMALS)),
            "op": op, "threshold": thr.value, "threshold_name": thr.name, "origin": thr.origin,
            "text": sentence(column, float(value), op, thr)}


def _num(metrics: Mapping[str, Any], column: str) -> float | None:
    """``metrics[column]`` as a float; None when absent or NaN / inf (not collected)."""
    value = metrics.get(column)
    return None if value is None else finite_or_none(float(value))


_CORE_KIND = {"cube": "cube", "vector": "vector", "mix_aic": "mix", "mix_aiv": "mix", "ai_cpu": "ai_cpu"}
# CANN op types are CamelCase (MatMulV2, TransData); torch_npu names their tasks aclnn<Api>_<Impl>_<Type>.
_VENDOR_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# A Triton-Ascend kernel row has Type == Name == the Python function name (docs/profiler-formats.md §8).
_PY_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def kernel_kind(name: str, op_type: str | None, core_type: str, rules: RuleSet) -> KernelKind:
    """The kind of a kernel from its row: core type, family by op type / name, and who made it."""
    op = str(op_type or name)
    core = _CORE_KIND.get(core_type, "other")
    family = next((fam for fam, pattern, _ in rules.families if pattern.search(op) or pattern.search(name)),
                  "other")
    if name.startswith("aclnn") or (op != name and _VENDOR_TYPE.match(op)):
        maker, why = "vendor", f"op type {op} (a CANN op)"
    elif op == name and _PY_NAME.match(name):
        maker, why = "triton", "type equals the lower-case kernel name (how Triton-Ascend kernels appear)"
    elif _VENDOR_TYPE.match(op):
        maker, why = "vendor", f"op type {op} (CamelCase: a CANN op)"
    else:
        maker, why = "unknown", f"op type {op}"
    return KernelKind(core, family, maker, f"{core} core, {family} family, {maker}: {why}")


def _finding(rules: RuleSet, name: str, evidence: list[dict[str, Any]], kind: KernelKind | None = None,
             backend: str | None = None) -> Finding:
    return _finding_of(rules.rule(name), evidence, kind, backend)


def _finding_of(rule: Rule, evidence: list[dict[str, Any]], kind: KernelKind | None,
                backend: str | None = None) -> Finding:
    """The finding of ``rule``, its levers limited to what fits this kernel's kind and the profile's backend."""
    levers = [lv for lv in rule.levers if lv.fits(kind, backend)]
    return Finding(rule.name, rule.label, evidence, [lv.text for lv in levers], [lv.origin for lv in levers])


def backend_of(kind: str) -> str:
    """The backend of a profile kind: npu (npu, msprof, msprof-op), cuda or cpu."""
    return "npu" if kind in NPU_KINDS else kind


def classify(kernel: Mapping[str, Any], *, kind: str, device: Mapping[str, Any], rules: RuleSet) -> Classification:
    """Classify one aggregated kernel.

    ``kernel``: ``core_type``, ``avg_us``, ``block_dim`` (may be None), ``metrics`` (canonical
    column -> value, None when not collected), optionally ``name`` and ``op_type`` (for the kernel's
    kind; without them the kernel's maker is unknown) and ``launch_groups`` (``[{"block_dim",
    "mix_block_dim", "count"}]``: core-use is judged per group, else on ``block_dim``). ``kind``: the
    profile kind (npu | msprof | msprof-op | cuda | cpu). ``device``: ``cube_cores`` / ``vector_cores``.

    Two questions, answered separately (the practice asks the first, msprof-analyze's bounds the second):
    which pipe dominates (``Classification.dominant``, see ``dominant_pipe``) and whether a pipe reaches
    its saturation bound (a pipe class fired; ``Classification.saturated``).
    """
    metrics = dict(kernel.get("metrics") or {})
    if metrics.get("vector_pipe_sum_ratio") is None:
        parts = [v for v in (_num(metrics, c) for c in VECTOR_PIPE_SUM) if v is not None]
        metrics["vector_pipe_sum_ratio"] = sum(parts) if parts else None
    backend = backend_of(kind)
    name = str(kernel.get("name") or "")
    kk = kernel_kind(name, kernel.get("op_type") or name, str(kernel.get("core_type")), rules)
    fired: list[tuple[float, Rule, Finding]] = []
    for rule in rules.pipe_rules:
        if rule.backends and backend not in rule.backends:
            continue
        ev = []
        for check in rule.checks:
            value = _num(metrics, check.column)
            if value is None or check.threshold.value is None or not check.applies(kk.family):
                continue
            if value >= check.threshold.value:
                ev.append((value / check.threshold.value, _evidence(check.column, value, check.threshold)))
        if ev:
            ev.sort(key=lambda t: -t[0])
            fired.append((ev[0][0], rule, _finding_of(rule, [e for _, e in ev], kk, backend)))
    # the pipe furthest past its bound leads (secondary classes only when nothing else fired); ratios
    # overlap, so several classes may fire at once
    fired.sort(key=lambda t: (t[1].secondary, -t[0]))
    findings = [f for _, _, f in fired]
    dominant = dominant_pipe(metrics, backend, kk, rules)
    saturated: bool | None = None
    label = None
    if findings:
        bound, saturated = findings[0].cls, True
        tie = _near_tie(fired, rules, kk, backend)
        if tie is not None:
            bound = tie.cls
            findings.insert(0, tie)
    else:
        bound, extra = _no_pipe_class(kernel, metrics, rules, kk, backend, dominant)
        findings.append(extra)
        if dominant is not None and dominant["leads"] and bound == dominant["class"]:
            saturated = False
            label = f"{dominant['pipe']} leads (not saturated: below its bound {dominant['bound']:g})"
    if dominant is not None:  # whether the leading pipe itself reaches its saturation bound
        dominant["saturated"] = any(rule.name == dominant["class"] for _, rule, _ in fired)
    if backend == "npu":
        groups = kernel.get("launch_groups") or [{"block_dim": kernel.get("block_dim"),
                                                  "mix_block_dim": kernel.get("mix_block_dim"), "count": None}]
        findings += core_use_groups(kernel, groups, device, rules, kk)
    return Classification(bound, findings, kk, dominant, saturated, label)


def _pipe_bounds(rules: RuleSet, backend: str, kk: KernelKind | None) -> dict[str, tuple[Rule, Threshold]]:
    """Canonical pipe column -> (the class it can fire, the saturation bound that applies to this kernel)."""
    out: dict[str, tuple[Rule, Threshold]] = {}
    for rule in rules.pipe_rules:
        if rule.secondary or (rule.backends and backend not in rule.backends):
            continue
        for check in rule.checks:
            if check.column in PIPE_COLUMNS and (kk is None or check.applies(kk.family)):
                out.setdefault(check.column, (rule, check.threshold))
    return out


def pipe_name(rule: Rule) -> str:
    """The pipe a class is named after, from its label: "MTE2-bound (memory in ...)" -> "MTE2"."""
    return rule.label.split("-bound")[0].split(" (")[0]


def dominant_pipe(metrics: Mapping[str, Any], backend: str, kk: KernelKind | None,
                  rules: RuleSet) -> dict[str, Any] | None:
    """Which pipe dominates, whatever the saturation bounds say; None without pipe counters.

    The pipe ratios (fraction of the kernel's time each pipe was busy, 0..1) of the classes this backend
    has are ranked; the leader *clearly leads* when its ratio is at least ``dominant_pipe_lead`` times the
    ratio of the busiest pipe of any other class (the two halves of one pipe, e.g. cube and vector MTE2,
    are one class and do not compete). Returns ``{"column", "value", "class", "pipe", "next_column",
    "next_value", "lead" (value / next_value, None when the next is 0), "leads", "bound" (the saturation
    bound of the column for this kernel), "bound_name", "rule" {"threshold", "origin"}}``; ``saturated`` is
    added by ``classify``.
    """
    bounds = _pipe_bounds(rules, backend, kk)
    present = {c: v for c in bounds if (v := _num(metrics, c)) is not None}
    if not present:
        return None
    top = max(present, key=lambda c: present[c])
    top_rule, top_thr = bounds[top]
    others = {c: v for c, v in present.items() if bounds[c][0].name != top_rule.name}
    nxt = max(others, key=lambda c: others[c]) if others else None
    next_value = others[nxt] if nxt else 0.0
    factor = rules.thresholds["dominant_pipe_lead"]
    value = present[top]
    leads = value > 0 and value >= factor.value * next_value
    return {"column": top, "value": round(value, JSON_DECIMALS), "class": top_rule.name, "pipe": pipe_name(top_rule),
            "next_column": nxt, "next_value": None if nxt is None else round(next_value, JSON_DECIMALS),
            "lead": round(value / next_value, 4) if next_value > 0 else None, "leads": bool(leads),
            "bound": top_thr.value, "bound_name": top_thr.name,
            "rule": {"threshold": factor.value, "threshold_name": factor.name, "origin": factor.origin}}


def _near_tie(fired: list[tuple[float, Rule, Finding]], rules: RuleSet, kk: KernelKind,
              backend: str | None = None) -> Finding | None:
    """The compute_memory_tie finding when the lead and the best class of the other nature are within the margin."""
    primary = [(score, rule) for score, rule, _ in fired if not rule.secondary and rule.nature != "other"]
    if len(primary) < 2:
        return None
    lead_score, lead = primary[0]
    other = next(((s, r) for s, r in primary[1:] if r.nature != lead.nature), None)
    margin = rules.thresholds["near_tie_margin"]
    if other is None or lead_score - other[0] > margin.value:
        return None
    gap = lead_score - other[0]
    ev = {"column": "bound_margin", "value": round(gap, decimals_against(gap, margin.value, JSON_DECIMALS)),
          "op": "<=", "threshold": margin.value, "threshold_name": margin.name, "origin": margin.origin,
          "text": f"{lead.label} leads {other[1].label} by only {shown_against(gap, margin.value)} of their bounds "
                  f"(a tie within {margin.value:g})"}
    return _finding_of(rules.rule("compute_memory_tie"), [ev], kk, backend)


def _lead_evidence(dominant: Mapping[str, Any]) -> dict[str, Any]:
    """The evidence line of a pipe that clearly leads (or fails to): its ratio against the next pipe's."""
    rule = dominant["rule"]
    what, value = column_words(dominant["column"]), dominant["value"]
    if dominant["next_column"] is None:
        versus = "no other pipe is busy"
    else:
        lead = dominant["lead"]
        times = "" if lead is None else f"{shown_against(lead, rule['threshold'], 2)}x "
        versus = (f"{times}the next pipe, {column_words(dominant['next_column'])} "
                  f"{dominant['next_value']:.3f}")
    verb = "leads" if dominant["leads"] else "does not clearly lead"
    return {"column": dominant["column"], "value": value, "op": "leads" if dominant["leads"] else "< lead",
            "threshold": rule["threshold"], "threshold_name": rule["threshold_name"], "origin": rule["origin"],
            "text": f"{what} {value:.3f} {verb} ({versus}; a clear lead is >= {rule['threshold']:g}x)"}


def _no_pipe_class(kernel: Mapping[str, Any], metrics: Mapping[str, Any], rules: RuleSet,
                   kk: KernelKind | None = None, backend: str | None = None,
                   dominant: Mapping[str, Any] | None = None) -> tuple[str, Finding]:
    """No pipe reached its saturation bound: the leading pipe's class when one clearly leads (evidence: the
    lead, and the bound it stays below), latency-bound when short, else no dominant pipe."""
    present = {c: _num(metrics, c) for c in PIPE_COLUMNS if _num(metrics, c) is not None}
    if not present:
        return "no_counters", _finding(rules, "no_counters", [], kk, backend)
    # each column against the bound that applies to this kernel (a matmul's MTE2 against 0.95)
    bounds = {c: thr for c, (_, thr) in _pipe_bounds(rules, backend or "npu", kk).items()}
    default = rules.thresholds["no_bound_ratio"]
    top_col = max(present, key=lambda c: present[c] / (bounds.get(c, default).value or 1.0))
    short = rules.thresholds["short_kernel_us"]
    avg = kernel.get("avg_us")
    top_ev = _evidence(top_col, present[top_col], bounds.get(top_col, default), "<")
    if avg is not None and avg < short.value:
        return "latency_bound", _finding(rules, "latency_bound", [_evidence("avg_us", avg, short, "<"), top_ev], kk,
                                         backend)
    if dominant is not None and dominant["leads"]:
        col = dominant["column"]
        below = _evidence(col, present[col], bounds.get(col, default), "<")
        below["text"] += ": the pipe leads but is not saturated"
        return dominant["class"], _finding(rules, dominant["class"], [_lead_evidence(dominant), below], kk, backend)
    evidence = [top_ev] + ([_lead_evidence(dominant)] if dominant is not None else [])
    return "no_dominant_pipe", _finding(rules, "no_dominant_pipe", evidence, kk, backend)


def right_core_count(core_type: str, device: Mapping[str, Any]) -> tuple[str, int | None]:
    """The core count a kernel of this core type should be gridded over (seed: match the bound pipe)."""
    if core_type in ("cube", "mix_aic"):
        return "cube_cores", device.get("cube_cores")
    return "vector_cores", device.get("vector_cores")


def core_use_groups(kernel: Mapping[str, Any], groups: list[Mapping[str, Any]], device: Mapping[str, Any],
                    rules: RuleSet, kk: KernelKind | None = None) -> list[Finding]:
    """Core-use findings per launch group (launches of one kernel with one block dim / mix block dim).

    Each group is judged on its own (58 launches on 22 of 24 cores are under-use even when other
    launches of the kernel fill every core); evidence lines carry the group's ``launches``. The mix
    block dim of a MIX kernel (its vector-side blocks) is judged against the vector core count.
    """
    core_type = str(kernel.get("core_type"))
    if core_type not in ("cube", "vector", "mix_aic", "mix_aiv"):
        return []  # AI_CPU, DSA, Level0 "N/A": block dim is not a core grid
    by_class: dict[str, list[dict[str, Any]]] = {}
    for group in groups:
        count = group.get("count")
        for cls, ev in _group_core_use(core_type, group.get("block_dim"), "block_dim", device, rules):
            by_class.setdefault(cls, []).append(_with_launches(ev, count))
        if core_type.startswith("mix"):
            for cls, ev in _mix_core_use(group.get("mix_block_dim"), device, rules):
                by_class.setdefault(cls, []).append(_with_launches(ev, count))
    order = ("grid_cap", "vector_on_cube_cores", "core_underuse", "tail_wave")
    return [_finding(rules, cls, by_class[cls], kk) for cls in order if cls in by_class]


def _with_launches(ev: dict[str, Any], count: Any) -> dict[str, Any]:
    if count:
        ev["launches"] = int(count)
        ev["text"] = f"{int(count)} launch{'es' if int(count) != 1 else ''}: {ev['text']}"
    return ev


def _valid_blocks(blocks: Any) -> int | None:
    if blocks is None:
        return None
    value = float(blocks)
    return int(value) if math.isfinite(value) and value > 0 else None


def _waves(ev: dict[str, Any], blocks: int, cores: int) -> dict[str, Any]:
    waves = -(-blocks // cores)
    ev["waves"] = waves
    ev["last_wave_fill"] = round((blocks - (waves - 1) * cores) / cores, 4)
    ev["text"] += f": {waves} waves, the last {100 * ev['last_wave_fill']:.0f} % full"
    return ev


def _group_core_use(core_type: str, blocks_raw: Any, column: str, device: Mapping[str, Any],
                    rules: RuleSet) -> list[tuple[str, dict[str, Any]]]:
    blocks = _valid_blocks(blocks_raw)
    if blocks is None:
        return []
    out: list[tuple[str, dict[str, Any]]] = []
    cap = rules.thresholds["grid_cap"]
    if blocks > cap.value:
        out.append(("grid_cap", _evidence(column, blocks, cap, ">")))
    cube, vector = device.get("cube_cores"), device.get("vector_cores")
    core_src = (device.get("sources") or {}).get("vector_cores", device.get("source", "device facts"))
    if core_type == "vector" and cube and vector and vector > cube and blocks == cube:
        thr = Threshold("cube_cores", float(cube), f"device facts ({core_src}); seed: vector kernels on num_vectorcore")
        out.append(("vector_on_cube_cores", _evidence(column, blocks, thr, "==")))
        return out
    name, cores = right_core_count(core_type, device)
    if not cores:
        return out
    thr = Threshold(name, float(cores), f"device facts ({(device.get('sources') or {}).get(name, 'device')})")
    if blocks < cores:
        out.append(("core_underuse", _evidence(column, blocks, thr, "<")))
    elif blocks % cores:
        out.append(("tail_wave", _waves(_evidence(column, blocks, thr, "% !="), blocks, int(cores))))
    return out


def _mix_core_use(mix_raw: Any, device: Mapping[str, Any], rules: RuleSet) -> list[tuple[str, dict[str, Any]]]:
    """A MIX kernel's vector-side block count (Mix Block Dim) against the vector core count."""
    blocks, vector = _valid_blocks(mix_raw), device.get("vector_cores")
    if blocks is None or not vector:
        return []
    src = (device.get("sources") or {}).get("vector_cores", "device")
    thr = Threshold("vector_cores", float(vector), f"device facts ({src}); msprof-analyze BlockDimChecker uses aiv_num")
    if blocks < vector:
        return [("core_underuse", _evidence("mix_block_dim", blocks, thr, "<"))]
    if blocks % vector:
        return [("tail_wave", _waves(_evidence("mix_block_dim", blocks, thr, "% !="), blocks, int(vector)))]
    return []
