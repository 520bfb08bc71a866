"""Step 6 on its own: profile the best configuration again, diff against the previous profile,
reclassify, say whether the metric the last hypothesis targeted moved, and apply the stop criteria.

"Previous" is the state before the last round's change (its ``profiles_before``), so the question
"did the change move the metric it aimed at" compares like with like; without rounds it is the
newest profile in the workspace (freeze/collect/demo put theirs under ``profiles/``).

What is profiled is the state the loop stands on, never a dropped round's change (a red gate applies
nothing): a bundled kernel's best kept configuration (else the baseline's), own code's working tree.
``profiled_state`` names it, and the summary's verdict is the last *applied* (non-drop) round's, so the
advice that follows (another round, or the report) comes from the stop criteria, not from a red gate
that the state profiled here never had.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from ascendopt.errors import UsageError
from ascendopt.rounds import profiles as round_profiles
from ascendopt.rounds import summary as round_summary
from ascendopt.rounds.context import RoundContext


def last_applied(records) -> object | None:
    """The newest round whose change was applied (gate green: keep, revert or floor); None when none was."""
    return next((r for r in reversed(records) if r.verdict != "drop"), None)


def profiled_state(ctx: RoundContext) -> dict[str, Any]:
    """What reprofile profiles, in words and as data: ``{"kind": "kernel" | "code", "round" (the applied round
    whose state it is, None: the baseline / an unrecorded tree), "hypothesis" (that round's), "text",
    "red_round" (own code: the dropped round whose tree this still is, else None)}``.

    Bundled kernel: the best kept configuration (``RoundContext.best_config``). Own code: the working tree
    (its HEAD and whether it has uncommitted edits), matched to a recorded round by its content digest."""
    if ctx.is_kernel:
        best = ctx.best_round
        config = ", ".join(f"{k}={v}" for k, v in (ctx.best_config or {}).items())
        if best is None:
            return {"kind": "kernel", "round": None, "hypothesis": None,
                    "text": f"the baseline configuration ({config})", "red_round": None}
        return {"kind": "kernel", "round": best.number, "hypothesis": best.hypothesis,
                "text": f"the best so far, round {best.number} ({best.hypothesis}; {config})", "red_round": None}
    from ascendopt.contract.frozen import project_root
    from ascendopt.rounds import tree as rtree

    tree = rtree.tree_state(project_root(), exclude=[ctx.ws.root])
    # the newest round that measured this very tree (its content digest), a dropped one included
    same = next((r for r in reversed(ctx.records)
                 if tree.digest and r.change.get("tree_digest") == tree.digest), None)
    at = f"at {tree.commit[:12]}" if tree.commit else "(no git commit)"
    edits = f" with {len(tree.uncommitted)} uncommitted path(s)" if tree.uncommitted else ""
    text = f"the working tree {at}{edits}"
    if same is not None:
        text += f": the tree of round {same.number} ({same.hypothesis}, {same.verdict})"
    applied = same is not None and same.verdict != "drop"
    return {"kind": "code", "round": same.number if applied else None,
            "hypothesis": same.hypothesis if applied else None, "text": text,
            "red_round": same.number if same is not None and not applied else None}


def reprofile(ctx: RoundContext, *, target_metric: str | None = None, step: Callable[[str], None] | None = None,
              timeout: float | None = None) -> dict[str, Any]:
    """Collect the current state again and compare. Returns a JSON-ready dict (see ``cli/reprofile.py``):
    ``profiled`` (``profiled_state``), ``hypothesis`` (the hypothesis of the round whose state was
    profiled, None for the baseline or an unrecorded tree), ``notes`` (e.g. that the last round was dropped
    and is not in the profile). ``timeout``: ``--timeout`` in seconds, replacing the contract's
    ``profile_s`` for the collection."""
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
    state = profiled_state(ctx)
    label = f"reprofile-{records[-1].number:04d}" if records else "reprofile"
    step(f"re-profiling {contract.op} with {', '.join(contract.metric_groups)}: {state['text']}")
    now = round_profiles.collect_profiles(ctx, config, label, timeout)
    step("analyzing and comparing with the previous profile")
    before = round_profiles.analyze_paths(previous)
    after = round_profiles.analyze_paths(now)
    last = records[-1] if records else None
    applied = last_applied(records)
    notes = []
    red = next((r for r in records if r.number == state.get("red_round")), None)
    if red is not None:  # own code: the tree profiled is the one a round's gate found red
        notes.append(f"the working tree still holds round {red.number}'s change ({red.hypothesis}), whose gate was "
                     "red: fix it until the gate is green, or undo it")
    elif last is not None and last.verdict == "drop":
        notes.append(f"round {last.number} ({last.hypothesis}) was dropped at a red gate and never applied: "
                     f"this profile is of {state['text']}")
    names = ctx.kernel_names
    bound_before = (round_summary.target_kernel(before, names) or {}).get("bound")
    target = round_summary.resolve_target_metric(target_metric or (applied.target_metric if applied else None),
                                                 applied.hypothesis if applied else "", bound_before)
    stop = ctx.stop_decision()
    summary = round_summary.build(kernel_names=names, before=before, after=after,
                                  verdict=(f"drop (round {red.number})" if red is not None
                                           else f"{applied.verdict} (round {applied.number})" if applied else "base"),
                                  another_round=not stop.stop,
                                  stop_reason=stop.reason, target_metric=target)
    # reprofile itself judges nothing: the verdict of the round whose state it profiled (a red one: the next
    # step is the gate), else of the last applied round
    summary["verdict_label"] = "verdict of the profiled tree's round" if red is not None else \
        "last applied round's verdict"
    return {"schema": 1, "previous": previous, "profiles": now, "config": config,
            "hypothesis": state["hypothesis"], "profiled": state, "notes": notes, "summary": summary,
            "compare": compare(before, after), "stop": stop.to_dict(),
            "kernels": [{k: kern.get(k) for k in ("name", "avg_us", "share", "bound")}
                        for kern in (after or {}).get("kernels", [])[:5]]}
