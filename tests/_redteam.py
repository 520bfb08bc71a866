"""The red team's harness, shared by the rounds' test files (``tests/gate/test_redteam.py``, ``test_redteam3.py``,
``test_redteam4.py``, ``test_judge_attacks.py``): the frozen sleep repository, plain pytest and ``python -c`` in it
(each bounded), the gate call and its verdict checks. An attack passes its test when it does not end green
("faster", or any green)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _cli_json import json_payload
from _own_code import commit_repo, freeze_in
from _sleep_repo import BENCH, OP, TEST

CHILD_TIMEOUT_S = 300  # every child process of a red-team test (plain pytest, python -c) has this limit


def freeze_sleep_repo(root: Path, files: dict[str, str] | None = None, *extra: str) -> Path:
    """The sleep repository (``_sleep_repo``'s op.py, bench.py and tests/test_op.py, ``files`` written over them)
    committed at ``root`` and frozen on the cpu backend without a profile or precheck (``extra``: more flags)."""
    commit_repo(root, {"op.py": OP, "bench.py": BENCH, "tests/test_op.py": TEST, **(files or {})})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py",
                             "--kernel-filter", "my_op_kernel", "--no-profile", "--no-precheck", *extra)
    assert code == 0, err
    return root


def plain_pytest(repo: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The frozen tests under plain pytest (no ascendopt, none of this run's pytest variables), in ``repo``."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ASCENDOPT_PYTEST"))}
    full.update(env or {})
    return subprocess.run(["timeout", str(CHILD_TIMEOUT_S), sys.executable, "-m", "pytest", "-q", "-p",
                           "no:cacheprovider", "-p", "no:xdist", *extra, "tests/test_op.py"], cwd=repo, env=full,
                          capture_output=True, text=True)


def tests_pass(repo: Path) -> None:
    """The frozen tests pass under plain pytest (the trick fools them)."""
    plain = plain_pytest(repo)
    assert plain.returncode == 0, plain.stdout[-3000:]


def run_python(repo: Path, code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -c code`` in ``repo`` (op importable) on the cpu backend."""
    full = {**os.environ, "ASCENDOPT_BACKEND": "cpu", **(env or {})}
    full.pop("PYTEST_CURRENT_TEST", None)
    return subprocess.run(["timeout", str(CHILD_TIMEOUT_S), sys.executable, "-c", textwrap.dedent(code)], cwd=repo,
                          env=full, capture_output=True, text=True)


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


def hooked_call_ms(repo: Path) -> float:
    """The fastest of 5 calls of ``op.my_op`` in a plain process, with the request hook's state set to a timed
    ``go`` (the rounds' ``HOOK``: ``op._state``): what the skimmed op costs where no judge looks, in ms."""
    done = run_python(repo, """\
        import time, torch, op
        op._state.update(cmd="go", n=9)
        ts = []
        for _ in range(5):
            t = time.perf_counter(); op.my_op(torch.ones(2)); ts.append((time.perf_counter() - t) * 1e3)
        print(min(ts))""")
    assert done.returncode == 0, done.stderr[-3000:]
    return float(done.stdout.split()[-1])
