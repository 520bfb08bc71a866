"""Bottleneck classification: rules as data (``configs/rules.yaml``), findings with evidence.

A pipe class fires when any of its checks holds (canonical column >= named threshold). A kernel's
``bound`` is the fired pipe class with the largest value / threshold (ratios overlap and can sum
above 1, so classes are never shares of a total; docs/profiler-formats.md §6.1). When
no pipe class fires, the kernel is latency-bound (short) or has no dominant pipe (long); without
counters it is not classified. Core-use checks (NPU only) add findings of their own: a vector
kernel on the cube core count, fewer blocks than cores, a partial last wave, a grid over 65535.
Every finding carries the column, value, threshold name, threshold value and its origin.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ascendopt.console import finite_or_none
from ascendopt.errors import UsageError

NPU_KINDS = ("npu", "msprof", "msprof-op")
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


@dataclass(frozen=True)
class Rule:
    name: str
    label: str
    checks: tuple[Check, ...]
    levers: tuple[str, ...]
    backends: tuple[str, ...]


@dataclass(frozen=True)
class RuleSet:
    thresholds: dict[str, Threshold]
    pipe_rules: tuple[Rule, ...]
    derived: dict[str, Rule]  # classes decided in code (checks empty)

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
    evidence: list[dict[str, Any]]  # [{"column", "value", "op", "threshold", "threshold_name", "origin"}]
    levers: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.cls, "label": self.label, "evidence": self.evidence, "levers": self.levers}


@dataclass
class Classification:
    bound: str
    findings: list[Finding] = field(default_factory=list)

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

    def rule(name: str, spec: Mapping[str, Any], section: str) -> Rule:
        checks = []
        for i, c in enumerate(spec.get("checks") or []):
            thr = c.get("threshold") if isinstance(c, Mapping) else None
            if thr not in thresholds or not c.get("column"):
                raise _fail(path, f"{section} -> {name} -> checks[{i}]: unknown threshold {thr!r} or no column")
            checks.append(Check(str(c["column"]), thresholds[thr]))
        levers = spec.get("levers") or []
        if not levers:
            raise _fail(path, f"{section} -> {name}: no levers")
        return Rule(name, str(spec.get("label", name)), tuple(checks), tuple(map(str, levers)),
                    tuple(spec.get("backends") or ()))

    pipe = tuple(rule(n, s, "classes") for n, s in (data.get("classes") or {}).items())
    derived = {n: rule(n, s, "derived_classes") for n, s in (data.get("derived_classes") or {}).items()}
    needed = {"latency_bound", "no_dominant_pipe", "no_counters", "vector_on_cube_cores", "core_underuse",
              "tail_wave", "grid_cap", "fallback_unfused"}
    missing = needed - set(derived)
    if missing:
        raise _fail(path, f"derived_classes: missing {', '.join(sorted(missing))}")
    for name in ("short_kernel_us", "grid_cap", "no_bound_ratio", "fallback_target_share",
                 "fallback_min_small_kernels"):
        if name not in thresholds:
            raise _fail(path, f"thresholds: missing {name}")
    return RuleSet(thresholds, pipe, derived)


@lru_cache(maxsize=4)
def _cached(config_dir: str) -> RuleSet:
    from ascendopt.device.config import load_config

    return parse_rules(load_config("rules"), f"{config_dir}/rules.yaml")


def load_rules() -> RuleSet:
    from ascendopt.device.config import config_dir

    return _cached(str(config_dir()))


def _evidence(column: str, value: float, thr: Threshold, op: str = ">=") -> dict[str, Any]:
    return {"column": column, "value": round(float(value), 6), "op": op, "threshold": thr.value,
            "threshold_name": thr.name, "origin": thr.origin}


def _num(metrics: Mapping[str, Any], column: str) -> float | None:
    """``metrics[column]`` as a float; None when absent or NaN / inf (not collected)."""
    value = metrics.get(column)
    return None if value is None else finite_or_none(float(value))


def _finding(rules: RuleSet, name: str, evidence: list[dict[str, Any]]) -> Finding:
    r = rules.rule(name)
    return Finding(name, r.label, evidence, list(r.levers))


def classify(kernel: Mapping[str, Any], *, kind: str, device: Mapping[str, Any], rules: RuleSet) -> Classification:
    """Classify one aggregated kernel.

    ``kernel``: ``core_type``, ``avg_us``, ``block_dim`` (may be None) and ``metrics`` (canonical
    column -> value, None when not collected). ``kind``: the profile kind (npu | msprof |
    msprof-op | cuda | cpu). ``device``: ``cube_cores`` / ``vector_cores`` for core-use checks.
    """
    metrics = kernel.get("metrics") or {}
    backend = "npu" if kind in NPU_KINDS else kind
    fired: list[tuple[float, Finding]] = []
    for rule in rules.pipe_rules:
        if rule.backends and backend not in rule.backends:
            continue
        ev = []
        for check in rule.checks:
            value = _num(metrics, check.column)
            if value is None or check.threshold.value is None:
                continue
            if value >= check.threshold.value:
                ev.append((value / check.threshold.value, _evidence(check.column, value, check.threshold)))
        if ev:
            ev.sort(key=lambda t: -t[0])
            fired.append((ev[0][0], Finding(rule.name, rule.label, [e for _, e in ev], list(rule.levers))))
    # the pipe furthest past its bound leads; ratios overlap, so several classes may fire at once
    fired.sort(key=lambda t: -t[0])
    findings = [f for _, f in fired]
    if findings:
        bound = findings[0].cls
    else:
        bound, extra = _no_pipe_class(kernel, metrics, rules)
        findings.append(extra)
    if backend == "npu":
        findings += core_use(kernel, device, rules)
    return Classification(bound, findings)


def _no_pipe_class(kernel: Mapping[str, Any], metrics: Mapping[str, Any], rules: RuleSet) -> tuple[str, Finding]:
    present = {c: _num(metrics, c) for c in PIPE_COLUMNS if _num(metrics, c) is not None}
    if not present:
        return "no_counters", _finding(rules, "no_counters", [])
    top_col = max(present, key=present.get)
    short = rules.thresholds["short_kernel_us"]
    avg = kernel.get("avg_us")
    top_ev = _evidence(top_col, present[top_col], rules.thresholds["no_bound_ratio"], "<")
    if avg is not None and avg < short.value:
        return "latency_bound", _finding(rules, "latency_bound", [_evidence("avg_us", avg, short, "<"), top_ev])
    return "no_dominant_pipe", _finding(rules, "no_dominant_pipe", [top_ev])


def right_core_count(core_type: str, device: Mapping[str, Any]) -> tuple[str, int | None]:
    """The core count a kernel of this core type should be gridded over (seed: match the bound pipe)."""
    if core_type in ("cube", "mix_aic"):
        return "cube_cores", device.get("cube_cores")
    return "vector_cores", device.get("vector_cores")


def core_use(kernel: Mapping[str, Any], device: Mapping[str, Any], rules: RuleSet) -> list[Finding]:
    """Core-use findings for one NPU kernel from its block count and the device's core counts."""
    blocks = kernel.get("block_dim")
    core_type = str(kernel.get("core_type"))
    if blocks is None or not math.isfinite(float(blocks)) or blocks <= 0:
        return []
    if core_type not in ("cube", "vector", "mix_aic", "mix_aiv"):
        return []  # AI_CPU, DSA, Level0 "N/A": block dim is not a core grid
    blocks = int(blocks)
    out: list[Finding] = []
    cap = rules.thresholds["grid_cap"]
    if blocks > cap.value:
        out.append(_finding(rules, "grid_cap", [_evidence("block_dim", blocks, cap, ">")]))
    cube, vector = device.get("cube_cores"), device.get("vector_cores")
    core_src = (device.get("sources") or {}).get("vector_cores", device.get("source", "device facts"))
    if core_type == "vector" and cube and vector and vector > cube and blocks == cube:
        thr = Threshold("cube_cores", float(cube), f"device facts ({core_src}); seed: vector kernels on num_vectorcore")
        out.append(_finding(rules, "vector_on_cube_cores", [_evidence("block_dim", blocks, thr, "==")]))
        return out
    name, cores = right_core_count(core_type, device)
    if not cores:
        return out
    thr = Threshold(name, float(cores), f"device facts ({(device.get('sources') or {}).get(name, 'device')})")
    if blocks < cores:
        out.append(_finding(rules, "core_underuse", [_evidence("block_dim", blocks, thr, "<")]))
    elif blocks % cores:
        waves = -(-blocks // cores)
        ev = _evidence("block_dim", blocks, thr, "% !=")
        ev["waves"] = waves
        ev["last_wave_fill"] = round((blocks - (waves - 1) * cores) / cores, 4)
        out.append(_finding(rules, "tail_wave", [ev]))
    return out
