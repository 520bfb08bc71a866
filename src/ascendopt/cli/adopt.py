"""`ascendopt adopt`: accept a workspace's ledger as it is, in one audit log entry that says so."""

from __future__ import annotations

import typer

from ascendopt.cli.options import JsonOpt, WorkspaceOpt, examples


def adopt(workspace: WorkspaceOpt = None, json: JsonOpt = False) -> None:
    """Accept the workspace's ledger as it is (logged).

    For a workspace of an older ascendopt (a contract without an audit log), a log the gate reports as
    deleted, rolled back or replaced, or a contract not written by a freeze. One `adopt` entry in log.jsonl
    records every file with its digest and the problems it accepts; the gate checks from there on. Nothing
    to adopt (the log chains to the freeze): no entry, exit 0. No contract: exit 2."""
    from ascendopt import console
    from ascendopt.workspace import Workspace
    from ascendopt.workspace import adopt as adopt_workspace

    ws = Workspace.resolve(workspace)
    if ws.contract_path.is_file():
        from ascendopt.contract.model import load_raw
        from ascendopt.errors import IntegrityError

        try:  # a contract that no longer reads (truncated, not YAML) stays refused by every command whatever the
            # log says: accepting it would record a workspace nothing can use
            load_raw(ws)
        except IntegrityError as exc:
            raise IntegrityError(f"{exc.message}: not adopted (adopt accepts a readable contract as it is, not one "
                                 "no command can read)", hint=exc.hint) from None
    result = adopt_workspace(ws)
    data = {"workspace": str(ws.root), "log": str(ws.log_path), **result}
    console.next_steps([("ascendopt gate", "")])
    if json:
        console.print_json(data)
        return
    if result["entry"] is None:
        console.info(f"adopt: nothing to adopt: {ws.log_path} chains to the freeze that made the contract")
        return
    console.info(f"adopt: {len(result['adopted'])} file(s) of {ws.root} adopted as they are "
                 f"({ws.log_path.name} line {result['entry']})")
    for text in result["accepted"]:
        console.info(f"  accepted: {text}")


EXAMPLES = examples(
    "ascendopt adopt",
    "ascendopt adopt --json -w .ascendopt-cpu",
)


def register(app: typer.Typer, name: str) -> None:
    app.command(name, epilog=EXAMPLES)(adopt)
