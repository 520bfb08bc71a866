"""What to run after a command: the one place both the text output's ``next:`` line and the ``--json``
envelope's ``next`` list come from (``console.next_steps`` prints or records them).

Each function returns ``[(command line, why), ...]``, the commands in the order the loop runs them. A
command line names the workspace with ``-w`` so it can be pasted (or run by an agent) from anywhere.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

Steps = list[tuple[str, str]]
HYPOTHESIS_PLACEHOLDER = "CHANGE: why it should help"


def _cmd(*words: str) -> str:
    return shlex.join(["ascendopt", *words])


def _round_command(ws: Any) -> str:
    """``optimize-round`` with a placeholder hypothesis; a bundled kernel's round also names a tunable."""
    from ascendopt.contract import model
    from ascendopt.errors import AscendoptError

    try:
        is_kernel = model.load(ws, check_digest=False).is_kernel
    except AscendoptError:  # no readable contract (the command that failed says why): no --set
        is_kernel = False
    change = ["--set", "NAME=VALUE"] if is_kernel else []
    return _cmd("optimize-round", "-w", str(ws.root), "--hypothesis", HYPOTHESIS_PLACEHOLDER, *change)


def after_freeze(ws: Any, contract: Any) -> Steps:
    """Analyze the baseline profile (or profile it first when freeze did not), then check the contract."""
    from ascendopt.rounds.context import RoundContext
    from ascendopt.rounds.profiles import baseline_profiles, collect_command

    ctx = RoundContext.for_contract(ws, contract)
    profiled = baseline_profiles(ctx)
    root = str(ws.root)
    first = ((_cmd("analyze", *profiled), "the baseline profile") if profiled else
             (collect_command(ctx), "profile the baseline; then `ascendopt analyze` the folders it prints"))
    return [first, (_cmd("gate", "-w", root), "checks the contract")]


def after_collect(paths: Sequence[Any]) -> Steps:
    """Analyze the folders just written, as one set."""
    return [(_cmd("analyze", *map(str, paths)), "hotspots, bottleneck class, levers")]


def after_kernels(name: str | None) -> Steps:
    """Freeze the kernel shown in detail (the list alone suggests nothing)."""
    return [(_cmd("freeze", "--kernel", name), "the contract: workload, tolerances, baseline")] if name else []


ACCEPT_PLACEHOLDER = "REASON: why the speedup is real"


def accept_command(ws: Any, record: Any) -> str:
    """The command that accepts ``record``'s implausible result: the round's own command (the same change,
    options and pair count, ``RoundRecord.command``) with ``--accept-implausible REASON``. It measures the
    same state again (own code: the unchanged working tree, which then draws no "unchanged" warning,
    ``rounds.tree.same_tree_note``), so the keep rests on a measurement taken with the acceptance on record,
    not on an edited old record (rounds are never rewritten)."""
    argv = shlex.split(record.command) if record.command else \
        ["ascendopt", "optimize-round", "--hypothesis", record.hypothesis]
    kept: list[str] = []
    skip = False
    for word in argv[2:]:  # drop an earlier acceptance and workspace: both are set below
        if skip:
            skip = False
            continue
        if word in ("--accept-implausible", "-w", "--workspace"):
            skip = True
            continue
        kept.append(word)
    return _cmd("optimize-round", "-w", str(ws.root), *kept, "--accept-implausible", ACCEPT_PLACEHOLDER)


def after_round(ws: Any, summary: Mapping[str, Any], record: Any = None) -> Steps:
    """Another round while the stop criteria allow one, else the report; a red gate first needs a green one.
    A round reverted only because its implausible speedup was not accepted (``record``): first the command
    that accepts it (``accept_command``), no new change needed."""
    from ascendopt.rounds.tree import awaits_acceptance

    root = str(ws.root)
    if record is not None and awaits_acceptance(record):
        return [(accept_command(ws, record), "the speedup is implausible: if you know why it is real, accept it "
                                             "(measured again, the reason recorded with your name)"),
                (_round_command(ws), "else look for the bug, then record the fix as a round")]
    if str(summary.get("verdict") or "").split(" ")[0] == "drop":  # a reprofile says "drop (round 3)"
        return [(_cmd("gate", "-w", root), "fix the change until the gate is green"),
                (_round_command(ws), "then record it as a round")]
    if summary.get("another_round"):
        return [(_round_command(ws), "another round is warranted"),
                (_cmd("report", "-w", root), "the merge-request summary so far")]
    return [(_cmd("report", "-w", root), "the stop criteria are met: write the merge-request summary")]


def after_auto(ws: Any) -> Steps:
    """Re-profile the best configuration the search found, then report."""
    root = str(ws.root)
    return [(_cmd("reprofile", "-w", root), "re-profile the best and reclassify"),
            (_cmd("report", "-w", root), "the merge-request summary")]


def after_gate(ws: Any, passed: bool, recorded: int | None = None) -> Steps:
    """A green gate: record the change as a round, unless round ``recorded`` already holds the state it judged
    (then re-profile it, or make the next change); a red one: fix and gate again."""
    if passed and recorded is not None:
        return [(_cmd("reprofile", "-w", str(ws.root)), f"round {recorded} already records this state: "
                                                         "re-profile it and check the stop criteria"),
                (_round_command(ws), "or make the next change and record it as a round"),
                (_cmd("report", "-w", str(ws.root)), "the merge-request summary")]
    if passed:
        return [(_round_command(ws), "record the change as a round"),
                (_cmd("report", "-w", str(ws.root)), "the merge-request summary")]
    return [(_cmd("gate", "-w", str(ws.root)), "again, once the red stage is fixed")]


def after_reprofile(ws: Any, summary: Mapping[str, Any]) -> Steps:
    """The stop criteria decide: another round, or the report."""
    return after_round(ws, summary)


def after_demo(ws: Any) -> Steps:
    """Go on with the loop the demo started (one more round, or --auto), then report."""
    return [(_round_command(ws), "one more round"),
            (_cmd("optimize-round", "-w", str(ws.root), "--auto", "--budget", "8"), "or search the tunables"),
            (_cmd("report", "-w", str(ws.root)), "the merge-request summary")]
