"""Issue 28 (the loop's record), on a real own-code repository (git, pytest and workload() in child processes):

* a red round records and prints the failing tests' own error lines, the lines ``gate`` prints;
* ``reprofile`` after a dropped round describes the tree it profiled, not the dropped hypothesis, and its
  advice follows the stop criteria, not the red gate of a change that was never applied.
"""

from __future__ import annotations

import pytest

from _cli_json import json_envelope, json_payload
from _own_code import commit_repo, freeze_in, sleep_repo_files, working_copy

FAILING_EDIT = ("return x * 2", "return x * 3")  # my_op(2) == 6: test_doubles' assertion fails


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    root = commit_repo(tmp_path_factory.mktemp("own") / "repo", sleep_repo_files(0.002))
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_op_kernel", "-w", str(root / ".ascendopt"))
    assert code == 0, err[-2000:]
    return root


@pytest.fixture
def repo(frozen, tmp_path, monkeypatch):
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    return working_copy(frozen, tmp_path, monkeypatch)


def _edit(root, old, new):
    op = root / "op.py"
    op.write_text(op.read_text().replace(old, new))


def test_a_red_round_records_and_prints_the_failing_tests_error_lines(repo, cli):
    ws = str(repo / ".ascendopt")
    _edit(repo, *FAILING_EDIT)
    code, gate_out, _ = cli("gate", "-w", ws, "--skip-perf")
    assert code == 1 and "assert 6 == 4" in gate_out  # what the gate shows
    code, out, err = cli("optimize-round", "-w", ws, "--hypothesis", "math: triple it", "--pairs", "12")
    assert code == 1, err[-2000:]
    assert "gate: RED at correctness" in out and "assert 6 == 4" in out  # the round's text, too
    from ascendopt.rounds.records import load_rounds
    from ascendopt.workspace import Workspace

    rec = load_rounds(Workspace(repo / ".ascendopt"))[-1]
    assert rec.verdict == "drop" and rec.gate["error"] is not None
    assert "assert 6 == 4" in rec.gate["error"] and "test_doubles" in rec.gate["error"]
    # the same lines as the gate prints for that stage
    gate_lines = [line for line in gate_out.splitlines()
                  if ("test_doubles" in line or "assert 6 == 4" in line) and "│" not in line]  # not the table
    assert gate_lines and all(line.strip() in rec.gate["error"] for line in gate_lines), (gate_out, rec.gate["error"])


def test_reprofile_after_a_dropped_round_describes_the_tree_it_profiled(repo, cli):
    ws = str(repo / ".ascendopt")
    _edit(repo, *FAILING_EDIT)
    code, _, err = cli("optimize-round", "-w", ws, "--hypothesis", "math: triple it", "--pairs", "12")
    assert code == 1, err[-2000:]
    # control: the tree still holds the red change, so the advice is the gate's
    code, out, err = cli("reprofile", "-w", ws, "--json")
    assert code == 0, err[-2000:]
    data = json_payload(out)
    assert data["profiled"]["red_round"] == 1 and any("still holds round 1's change" in n for n in data["notes"])
    assert json_envelope(out)["next"][0].startswith("ascendopt gate ")  # the next step is the gate
    _edit(repo, *reversed(FAILING_EDIT))  # the change is undone: the tree is the frozen one again
    code, _, err = cli("gate", "-w", ws, "--skip-perf")
    assert code == 0, err[-2000:]
    code, out, err = cli("reprofile", "-w", ws, "--json")
    assert code == 0, err[-2000:]
    envelope = json_envelope(out)
    data = json_payload(out)
    assert data["hypothesis"] is None and "triple" not in data["profiled"]["text"]
    assert data["profiled"]["text"].startswith("the working tree at ")
    assert any("round 1 (math: triple it) was dropped" in n for n in data["notes"])
    assert "drop" not in data["summary"]["verdict"]
    assert not envelope["next"][0].startswith("ascendopt gate "), envelope["next"]
    code, out, err = cli("reprofile", "-w", ws)
    assert code == 0, err[-2000:]
    assert "reprofile of the working tree at" in out and "after: math: triple it" not in out
    assert "next: " in err and "until the gate is green" not in err and "another round is warranted" in err
