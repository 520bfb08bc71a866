"""Step 6 on its own: profile the best configuration again, diff against the previous profile,
reclassify, say whether the metric the last hypothesis targeted moved, and apply the stop criteria.

"Previous" is the state before the last round's change (its ``profiles_before``), so the question
"did the change move the metric it aimed at" compares like with like; without rounds it is the
newest profile in the workspace (freeze/collect/demo put theirs under ``profiles/``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from ascendopt.errors import UsageError
from ascendopt.rounds import profiles as round_profiles
from ascendopt.rounds import summary as round_summary
from ascendopt.rounds.context import RoundContext


def reprofile(ctx: RoundContext, *, target_metric: str | None = None, step: Callable[[str], None] | None = None,
              timeout: float | None = None) -> dict[str, Any]:
    """Collect the current best again and compare. Returns a JSON-ready dict (see ``cli/reprofile.py``).
    ``timeout``: ``--timeout`` in seconds, replacing the contract's ``profile_s`` for the collection."""
    from ascendopt.analyze.diagnosis import compare

    step = step or (lambda text: None)
    contract, records = ctx.contract, ctx.records
    previous = round_profiles.previous_profiles(ctx)
    if not previous:
        raise UsageError(f"{ctx.ws.profiles_dir}: no previous profile to compare with",
                         hint=f"profile the workload into it first: `{round_profiles.collect_command(ctx)}` "
                              f"(or run a round: `ascendopt optimize-round -w {shlex.quote(str(ctx.ws.root))} "
                              "--hypothesis ...`)")
    config = ctx.best_config
    label = f"reprofile-{records[-1].number:04d}" if records else "reprofile"
    step(f"re-profiling {contract.op} with {', '.join(contract.metric_groups)}")
    now = round_profiles.collect_profiles(ctx, config, label, timeout)
    step("analyzing and comparing with the previous profile")
    before = round_profiles.analyze_paths(previous)
    after = round_profiles.analyze_paths(now)
    last = records[-1] if records else None
    names = ctx.kernel_names
    bound_before = (round_summary.target_kernel(before, names) or {}).get("bound")
    target = round_summary.resolve_target_metric(target_metric or (last.target_metric if last else None),
                                                 last.hypothesis if last else "", bound_before)
    stop = ctx.stop_decision()
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
