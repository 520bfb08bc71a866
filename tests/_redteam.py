"""The red team's gate call and its verdict checks, shared by the rounds' test files (``tests/gate/test_redteam3.py``,
``test_redteam4.py``): an attack passes its test when it does not end green ("faster", or any green)."""

import json
import os

import pytest

from _cli_json import json_payload


def gate_logged(repo, op: str | None, pairs: str, *extra: str, log: str):
    """``gate --json`` in ``repo`` (the current folder) with ``op`` as op.py (None: as it is) -> (exit code,
    stages by name, stderr); the outcome is appended to ``log`` (one JSON line: a round's results table)."""
    from conftest import run_cli

    if op is not None:
        (repo / "op.py").write_text(op)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASCENDOPT_BACKEND", "cpu")
        code, out, err = run_cli("gate", "--json", "--pairs", pairs, *extra)
    stages = {s["name"]: s for s in json_payload(out)["stages"]}
    perf = stages.get("performance", {})
    data = perf.get("data", {})
    comps = data.get("comparisons", [])
    red = next((s for s in stages.values() if s["status"] not in ("pass", "not-run")), None)
    with open(log, "a") as fh:
        fh.write(json.dumps({"test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0], "exit": code,
                             "stage": red["name"] if red else None, "status": red["status"] if red else "green",
                             "summary": (red or perf).get("summary", "")[:600],
                             "verdicts": [c.get("verdict") for c in comps], "ratio": [c.get("ratio") for c in comps],
                             "weighted": data.get("weighted"),
                             "doubts": data.get("audit", {}).get("doubts")}) + "\n")
    return code, stages, err


def verdicts(stages):
    data = stages.get("performance", {}).get("data", {})
    found = [c.get("verdict") for c in data.get("comparisons", [])]
    if data.get("weighted"):
        found.append(data["weighted"].get("verdict"))
    return found


def not_a_speedup(code, stages):
    perf = stages.get("performance", {})
    found = verdicts(stages)
    assert not (code == 0 and "faster" in found), (
        f"GOT THROUGH: exit {code}, verdicts {found}, {perf.get('summary')}")


def not_green(code, stages):
    assert code != 0, f"GOT THROUGH: exit {code}, verdicts {verdicts(stages)}"
