"""`ascendopt status`: where the loop stands — contract, rounds, best so far, stop criteria, next step."""

from __future__ import annotations

from typing import Any

import typer

from ascendopt.cli.options import JsonOpt, WorkspaceOpt, examples


def status(workspace: WorkspaceOpt = None, json: JsonOpt = False) -> None:
    """Where the loop stands, and the next command to run.

    Say where the loop stands: the contract (bundled kernel or own code, commit, baseline), the rounds
    (count, last verdict, the best and its speedup over the baseline with its spread), the stop criteria
    and the next step. Reads only; finds the workspace from any subdirectory of the repository. No
    workspace: exit 2 with the freeze command to run."""
    from ascendopt import console
    from ascendopt.rounds.status import loop_status
    from ascendopt.workspace import Workspace

    data = loop_status(Workspace.resolve(workspace))
    # the envelope's `next`, and the one `next:` line on stderr, like every other command
    console.next_steps([(step, "") for step in data["next"]])
    if json:
        console.print_json(data)
        return
    render(data)


def _ms(value: float | None) -> str:
    """A duration in ms as text in the unit its magnitude picks."""
    from ascendopt.console import duration_text

    return duration_text(None if value is None else value * 1e3)


def _spread(side: dict[str, float] | None) -> str:
    from ascendopt.console import spread_text

    if not side:
        return "-"
    return spread_text(side["median"] * 1e3, side["p20"] * 1e3, side["p80"] * 1e3)


def render(data: dict[str, Any]) -> None:
    """The status as a field/value table, the best's cases, and the next-step lines (stdout)."""
    from ascendopt import console
    from ascendopt.cli.render import format_config

    c, r, stop = data["contract"], data["rounds"], data["stop"]
    commit = (c["commit"] or "none")[:12] + (" (dirty)" if c["dirty"] else "")
    rows = [("workspace", data["workspace"]),
            ("contract", f"{'bundled kernel' if c['kind'] == 'kernel' else 'own code'} {c['target']}"
                         + (f" ({c['op']})" if c["op"] != c["target"] else "") + f" on {c['backend']} ({c['device']})"),
            ("frozen", f"{c['frozen_at']} at commit {commit}"),
            ("integrity", "contract digest matches" if c["digest_ok"] else f"EDITED: {c['edited']}")]
    if c["config"]:
        rows.append(("baseline config", format_config(c["config"])))
    rows += [(f"baseline {b['case']}", f"{_spread({'median': b['median_ms'], 'p20': b['p20_ms'], 'p80': b['p80_ms']})} "
                                       f"n={b['n']}") for b in c["baseline"]]
    verdicts = ", ".join(f"{n} {v}" for v, n in sorted(r["verdicts"].items()))
    rows.append(("rounds", f"{r['count']}" + (f" ({verdicts})" if verdicts else "")))
    last = r["last"]
    if last:
        rows.append(("last round", f"{last['number']} {last['verdict']} ({last['direction']}): {last['hypothesis']}"
                                   + (f" [red at {last['failed_stage']}]" if last["failed_stage"] else "")))
    best = r["best"]
    if best:
        what = format_config(best["config"]) if best["config"] else (best["commit"] or "")[:12] or best["direction"]
        speed = "-" if best["speedup_vs_baseline"] is None else f"{best['speedup_vs_baseline']:.3f}x"
        band = "" if best["noise_band"] is None else f" (noise band ±{best['noise_band']:.1%})"
        rows.append(("best", f"round {best['number']} ({what}): {speed} vs baseline{band}, {_ms(best['best_ms'])}"))
    else:
        rows.append(("best", "the baseline (no round kept yet)"))
    rows.append(("stop criteria", ("STOP: " if stop["stop"] else "") + stop["reason"]))
    log = data["log"]
    rows.append(("audit log", console.plural(log["entries"], "entry", "entries") if log["exists"]
                 else "none yet (starts at the next write)"))
    rows += [("HAND EDIT", text) for text in log["problems"]]
    console.table(["field", "value"], rows, title="ascendopt status")
    if best and best["cases"]:
        console.table(["case", "baseline", "best", "speedup", "noise band"],
                      [(k["case"], _spread(k["baseline_ms"]), _spread(k["best_ms"]),
                        "-" if k["speedup"] is None else f"{k['speedup']:.3f}x",
                        "-" if k["noise_band"] is None else f"±{k['noise_band']:.1%}") for k in best["cases"]],
                      title=f"best (round {best['number']}) vs baseline, per case")


EXAMPLES = examples(
    "ascendopt status",
    "ascendopt status --json -w .ascendopt-cpu",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(status)
