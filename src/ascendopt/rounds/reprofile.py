"""Step 6 on its own: profile the best configuration again, diff against the previous profile,
reclassify, say whether the metric the last hypothesis targeted moved, and apply the stop criteria.

"Previous" is the state before the last round's change (its ``profiles_before``), so the question
"did the change move the metric it aimed at" compares like with like; without rounds it is the
newest profile in the workspace (freeze/collect/demo put theirs under ``profiles/``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendopt.errors import UsageError
from ascendopt.rounds import profiles as round_profiles
from ascendopt.rounds import records as rounds
from ascendopt.rounds import run as round_run
from ascendopt.rounds import summary as round_summary
from ascendopt.workspace import Workspace


def newest_profiles(ws: Workspace) -> list[str]:
    """The newest profile set under ``profiles/`` (folders sharing the newest one's name prefix)."""
    if not ws.profiles_dir.is_dir():
        return []
    folders = [p for p in ws.profiles_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
    if not folders:
        return []
    newest = max(folders, key=lambda p: p.stat().st_mtime)
    return [str(newest)]


def previous_profiles(ws: Workspace, records: list[rounds.RoundRecord]) -> list[str]:
    for r in reversed(records):
        if r.profiles_before:
            return list(r.profiles_before)
        if r.profiles:
            return list(r.profiles)
    return newest_profiles(ws)


def reprofile(ws: Workspace, *, target_metric: str | None = None, step: Callable[[str], None] | None = None
              ) -> dict[str, Any]:
    """Collect the current best again and compare. Returns a JSON-ready dict (see ``cli/reprofile.py``)."""
    from ascendopt.analyze.diagnosis import compare
    from ascendopt.contract import model as contract_mod

    step = step or (lambda text: None)
    contract = contract_mod.load(ws)
    records = rounds.load_rounds(ws)
    previous = previous_profiles(ws, records)
    if not previous:
        raise UsageError(f"{ws.profiles_dir}: no previous profile to compare with",
                         hint="run `ascendopt collect` or `ascendopt optimize-round` first")
    best = rounds.best_round(records)
    config = None
    if contract.is_kernel:
        from ascendopt import kernels

        spec = kernels.get(contract.workload.kernel)
        config = dict(best.config) if best and best.config else spec.config(contract.workload.config)
    label = f"reprofile-{records[-1].number:04d}" if records else "reprofile"
    step(f"re-profiling {contract.op} with {', '.join(contract.metric_groups)}")
    now = round_profiles.collect_profiles(ws, contract, config, label)
    step("analyzing and comparing with the previous profile")
    before = round_profiles.analyze_paths(previous)
    after = round_profiles.analyze_paths(now)
    last = records[-1] if records else None
    names = round_profiles.kernel_names(contract)
    bound_before = (round_summary.target_kernel(before, names) or {}).get("bound")
    target = round_summary.resolve_target_metric(target_metric or (last.target_metric if last else None),
                                                 last.hypothesis if last else "", bound_before)
    stop = rounds.should_stop(records, max_rounds=round_run.max_rounds(contract))
    summary = round_summary.build(kernel_names=names, before=before, after=after,
                                  verdict=f"{last.verdict} (round {last.number})" if last else "base",
                                  another_round=not stop.stop,
                                  stop_reason=stop.reason, target_metric=target)
    summary["verdict_label"] = "last round's verdict"  # reprofile itself judges nothing
    return {"schema": 1, "previous": previous, "profiles": now, "config": config,
            "hypothesis": last.hypothesis if last else None, "summary": summary,
            "compare": compare(before, after), "stop": stop.to_dict(),
            "kernels": [{k: kern.get(k) for k in ("name", "avg_us", "share", "bound")}
                        for kern in (after or {}).get("kernels", [])[:5]]}


def print_result(result: dict[str, Any]) -> None:
    from ascendopt import console

    title = "reprofile" + (f" after: {result['hypothesis']}" if result.get("hypothesis") else "")
    round_summary.render(result["summary"], title)  # its last line applies the stop criteria
    console.out(f"previous: {', '.join(Path(p).name for p in result['previous'])}")
    console.out(f"profile: {', '.join(result['profiles'])}")
