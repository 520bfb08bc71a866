"""`ascendopt status`: where the loop stands — contract, rounds, best so far, stop criteria, next step."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ascendopt.cli.options import CsvOpt, JsonOpt, WorkspaceOpt, examples


def status(
    workspace: WorkspaceOpt = None,
    rounds: Annotated[bool, typer.Option(
        "--rounds", help="Also show every round of the ledger side by side: change, gate, time, speedups vs "
                         "the baseline and the best, noise band, verdict; and, for a round over a shape mix, its "
                         "per-bucket table (weight, times, speedup, noise band, floor verdict).")] = False,
    csv: CsvOpt = False,
    json: JsonOpt = False,
) -> None:
    """Where the loop stands, and the next command to run.

    Say where the loop stands: the contract (bundled kernel or own code, commit, baseline), the rounds
    (count, last verdict, the best and its speedup over the baseline with its spread), the stop criteria
    and the next step. Reads only; finds the workspace from any subdirectory of the repository. No
    workspace: exit 2 with the freeze command to run."""
    from ascendopt import console
    from ascendopt.rounds.status import loop_status
    from ascendopt.workspace import Workspace

    if csv:
        console.configure(csv=True)
    ws = Workspace.resolve(workspace)
    data = loop_status(ws)
    if rounds:
        from ascendopt.rounds.context import RoundContext
        from ascendopt.rounds.ledger_view import side_by_side

        data["ledger"] = side_by_side(RoundContext.load(ws, check_digest=False).records)
    # the envelope's `next`, and the one `next:` line on stderr, like every other command
    console.next_steps([(step, "") for step in data["next"]])
    if json:
        console.print_json(data)
        return
    render(data)
    if rounds:
        render_ledger(data["ledger"])


def render_ledger(rows: list[dict[str, Any]]) -> None:
    """All rounds side by side (``rounds.ledger_view``), verdicts coloured, each verdict's reason on a line
    under the table; ``--csv`` gives the same columns with the reason as the last one."""
    from ascendopt import console
    from ascendopt.cli.render import format_config, format_duration_ms, render_bucket_table

    def speedup(value: float | None, verdict: str | None) -> str:
        return "-" if value is None else f"{value:.3f}x" + (f" {verdict}" if verdict else "")

    csv = console.csv_tables()  # --csv: the reason is a column (a line under a CSV table would break it)
    console.table(
        ["round", "direction", "change", "gate", "time", "vs baseline", "vs best", "noise band", "verdict"]
        + (["reason"] if csv else []),
        [(r["number"], r["direction"],
          format_config(r["change"]) if isinstance(r["change"], dict) else (r["change"] or "-")[:12],
          console.styled(r["gate"] + (f" at {r['failed_stage']}" if r["failed_stage"] else ""), r["gate"]),
          format_duration_ms(r["candidate_ms"]), speedup(r["speedup_vs_baseline"], r["vs_baseline"]),
          speedup(r["speedup_vs_best"], r["vs_best"]),
          "-" if r["noise_band"] is None else f"±{r['noise_band']:.1%}", console.styled(r["verdict"]))
         + ((r["reason"],) if csv else ())
         for r in rows],
        title=f"rounds side by side ({len(rows)})" if rows else "rounds side by side: none recorded yet")
    if csv:
        return
    for r in rows:  # a round over a shape mix: its per-bucket table (the buckets its verdict was weighed over)
        render_bucket_table(r.get("buckets") or [], f"round {r['number']} per bucket of the shape mix, vs baseline")
    # the reasons under the table, one line each: a column this long would wrap every row of it
    for r in rows:
        if r.get("reason"):
            console.out(f"round {r['number']} {r['verdict']}: {r['reason']}")


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
    if c.get("target_code") is not None:
        rows.append(("target code", (", ".join(c["target_code"]) or "none")
                     + f"; {c['pinned_support']} file(s) the tests load pinned besides the tests"))
    if c["kind"] != "kernel":
        mix = c.get("shapes")
        rows.append(("shapes", "one: the workload's own (no shape mix frozen)" if mix is None else
                     f"{mix['buckets']} bucket(s) of {mix['kernel']} from a {mix['source']} mix, covering "
                     f"{mix['coverage']:.1%} of its profiled device time"))
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
        if last.get("reason"):
            rows.append(("last verdict's reason", last["reason"]))
    best = r["best"]
    if best:
        what = format_config(best["config"]) if best["config"] else (best["commit"] or "")[:12] or best["direction"]
        speed = "-" if best["speedup_vs_baseline"] is None else f"{best['speedup_vs_baseline']:.3f}x"
        band = "" if best["noise_band"] is None else f" (noise band ±{best['noise_band']:.1%})"
        rows.append(("best", f"round {best['number']} ({what}): {speed} vs baseline{band}, {_ms(best['best_ms'])}"))
        if best["commit"] and not best["config"]:
            mine = f"your commit {best['user_commit'][:12]} holds it" if best["user_commit"] else \
                f"in none of your recent commits (`git checkout {best['commit'][:12]} -- .` restores it)"
            rows.append(("best code", f"snapshot {best['commit'][:12]}; {mine}"))
    else:
        rows.append(("best", "the baseline (no round kept yet)"))
    rows.append(("stop criteria", ("STOP: " if stop["stop"] else "") + stop["reason"]))
    log = data["log"]
    rows.append(("audit log", console.plural(log["entries"], "entry", "entries") if log["exists"]
                 else "MISSING (see below)"))
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
    "ascendopt status --rounds            # every round side by side",
    "ascendopt status --rounds --csv > rounds.csv",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(status)
