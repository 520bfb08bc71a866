"""Where the loop stands (``ascendopt status``): the contract, the rounds, the best so far, the stop
criteria and the next step, as data (``cli/status.py`` renders it).

Read-only: the contract is loaded without failing on a hand edit (``contract.digest_ok`` says so, the
gate judges it), the rounds through one ``RoundContext`` (this contract's rounds only), the audit log
as read (``workspace.read_log``) with the ledger checked against it and the round records against their
digests (``log.problems``: what the gate's integrity stage would fail on). Times are ms per call; a
speedup is baseline time / best time (> 1 is faster), the best's from its own round's interleaved
timing against the baseline (``records.SPEEDUP_STATISTIC``: the number the round and the report print).
"""

from __future__ import annotations

import shlex
from collections import Counter
from typing import Any

from ascendopt.errors import IntegrityError
from ascendopt.rounds import records as rounds
from ascendopt.rounds.context import RoundContext
from ascendopt.rounds.records import RoundRecord
from ascendopt.workspace import Workspace, check_ledger, read_log


def loop_status(ws: Workspace) -> dict[str, Any]:
    """The status payload (``cli/schemas/status.schema.json``). A workspace without a contract is a
    usage error (exit 2) naming the folder and the freeze command to run."""
    from ascendopt.contract import model as contract_mod

    ws.check_ledger_shape()  # a folder named contract.yaml: a damaged workspace (exit 3), not a missing one
    if not ws.contract_path.is_file():
        raise ws.no_contract()
    raw = contract_mod.load_raw(ws)
    try:
        contract_mod.verify_digest(raw, ws.contract_path.name)
        edited = None
    except IntegrityError as exc:
        edited = str(exc)
    ctx = RoundContext.load(ws, check_digest=False)
    records = ctx.records
    stop = ctx.stop_decision()
    log = read_log(ws)
    # what the gate's integrity stage would say about the ledger (round digests, the log), said not judged
    audit = check_ledger(ws)
    problems = [text for _, text in [*rounds.tampered_rounds(ws), *audit.problems]]
    return {
        "workspace": str(ws.root),
        "contract": _contract(ctx, edited),
        "rounds": _rounds(records, ws),
        "stop": {**stop.to_dict(), "max_rounds": ctx.contract.max_rounds,
                 "rounds_left": max(0, ctx.contract.max_rounds - len(records))},
        "log": {"path": str(ws.log_path), "exists": ws.log_path.exists(), "entries": len(log.entries),
                "torn_lines": log.torn, "problems": problems, "notes": audit.notes},
        "next": next_steps(ctx, records, stop.stop, edited is not None or bool(problems)),
    }


def _contract(ctx: RoundContext, edited: str | None) -> dict[str, Any]:
    c = ctx.contract
    w = c.workload
    baseline = [{"case": b.case, "median_ms": b.median_ms, "p20_ms": b.p20_ms, "p80_ms": b.p80_ms, "cv": b.cv,
                 "n": b.n} for b in c.baseline]
    return {
        "kind": "kernel" if ctx.is_kernel else "own-code",
        "target": w.kernel if ctx.is_kernel else w.exec_file,
        "op": c.op,
        "backend": c.backend,
        "device": c.device.get("name"),
        "config": dict(ctx.baseline_config or {}) if ctx.is_kernel else None,
        "commit": c.git.get("commit"),
        "dirty": bool(c.git.get("dirty")),
        "frozen_at": c.created_at,
        "digest": ctx.contract_digest,
        "digest_ok": edited is None,
        "edited": edited,
        "baseline": baseline,
        "baseline_ms": rounds.geomean([b.median_ms for b in c.baseline]) if c.baseline else None,
        # the served-shape mix the verdict is weighed over (None: the contract judges one shape)
        "shapes": _shapes(c),
        # own code: the code a round is meant to change (None: a bundled kernel or an older contract)
        "target_code": list(c.targets) if c.targets is not None else None,
        "pinned_support": sum(f.role in ("test-support", "test-config") for f in c.frozen_files),
    }


def _rounds(records: tuple[RoundRecord, ...], ws: Workspace) -> dict[str, Any]:
    last = records[-1] if records else None
    best = rounds.best_round(records)
    return {
        "count": len(records),
        "verdicts": dict(Counter(r.verdict for r in records)),
        "directions": rounds.directions_tried(records),
        "last": None if last is None else {
            "number": last.number, "verdict": last.verdict, "direction": last.direction,
            "hypothesis": last.hypothesis, "created_at": last.created_at,
            "failed_stage": last.gate.get("failed_stage"), "reason": last.why},
        "best": None if best is None else _best(best, ws),
    }


def _best(best: RoundRecord, ws: Workspace | None = None) -> dict[str, Any]:
    """The best kept round and its speedup over the baseline with the spread behind it: per shape case
    the medians with p20/p80 of both sides and the noise band (relative, ± on the time ratio) of that
    round's interleaved comparison. A code round names its snapshot commit (``commit``; a record of an
    older ascendopt: the HEAD it started on) and the user's commit holding the same files
    (``user_commit``, None when none of the recent ones does, or without ``ws``)."""
    timing = best.timing or {}
    cases = []
    for case in timing.get("cases", []):
        vs = case.get("vs_baseline") or {}
        ratio = vs.get("ratio")
        cases.append({
            "case": case.get("case"),
            "speedup": 1 / ratio if ratio else None,
            "noise_band": vs.get("threshold_rel"),
            "verdict": vs.get("verdict"),
            "baseline_ms": _spread(case.get("baseline")),
            "best_ms": _spread(case.get("candidate")),
        })
    bands = [c["noise_band"] for c in cases if c["noise_band"] is not None]
    return {
        "number": best.number,
        "direction": best.direction,
        "hypothesis": best.hypothesis,
        "config": best.config,
        **_best_commits(best, ws),
        "best_ms": best.candidate_ms,
        "speedup_vs_baseline": best.speedup_vs_baseline,  # records.SPEEDUP_STATISTIC, as the round and report
        "noise_band": max(bands) if bands else None,
        "cases": cases,
    }


def _best_commits(best: RoundRecord, ws: Workspace | None) -> dict[str, Any]:
    change = best.change or {}
    if change.get("kind") != "code":
        return {"commit": None, "user_commit": None}
    if not change.get("snapshot") or ws is None:
        return {"commit": change.get("snapshot") or change.get("commit"), "user_commit": None}
    from ascendopt.contract.frozen import project_root
    from ascendopt.rounds.tree import best_commits

    found = best_commits(project_root(), best, ws.root)
    return {"commit": found["snapshot"], "user_commit": found["user_commit"]}


def _spread(timing: dict[str, Any] | None) -> dict[str, float] | None:
    if not timing:
        return None
    return {"median": timing["median_ms"], "p20": timing["p20_ms"], "p80": timing["p80_ms"]}


def next_steps(ctx: RoundContext, records: tuple[RoundRecord, ...], stopped: bool, edited: bool) -> list[str]:
    """The one or few commands that make sense now, first the one to run next. ``edited``: the contract
    or the ledger was edited by hand (the gate names it)."""
    from ascendopt.rounds.profiles import baseline_profiles, collect_command

    if edited:
        return ["ascendopt gate", "ascendopt freeze --force ... (re-freeze if the change was meant)"]
    change = "--set NAME=VALUE" if ctx.is_kernel else "--direction NAME"
    round_cmd = f"ascendopt optimize-round --hypothesis '...' {change}"
    if not records:
        profiled = baseline_profiles(ctx)
        first = shlex.join(["ascendopt", "analyze", *profiled]) if profiled else collect_command(ctx)
        return [first, round_cmd]
    if stopped:
        return ["ascendopt reprofile", "ascendopt report", "ascendopt gate"]
    steps = [round_cmd] + (["ascendopt optimize-round --hypothesis '...' --auto"] if ctx.is_kernel else [])
    if records[-1].verdict == "keep":
        steps.append("ascendopt gate")
    return steps


def _shapes(contract) -> dict[str, Any] | None:
    """The contract's shape mix in brief: its kernel, buckets, the share of the profiled device time it covers, and
    where it came from; None when the contract judges one shape."""
    mix = contract.shapes
    if mix is None:
        return None
    return {"kernel": mix.kernel, "buckets": len(mix.buckets), "coverage": mix.coverage,
            "source": (mix.source or {}).get("kind"),
            "weights": {f"bucket {i + 1} {b.shape}": b.weight for i, b in enumerate(mix.buckets)}}
