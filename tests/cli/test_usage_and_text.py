"""Small things users notice: usage errors of any option in one ``error:`` line (exit 2), counts with their noun
in the right number, durations in the unit their magnitude picks, JUnit names that do not depend on where the
project is checked out."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import typer

from ascendopt import console
from ascendopt.cli import app


def _ranged_options() -> list[tuple[str, str, str]]:
    """``(command, option, a value out of its range)`` for every option of every command that has a range (click's
    ``IntRange``/``FloatRange``) or a positive-seconds callback (``--timeout``)."""
    group = typer.main.get_command(app)
    found = []
    for name, command in sorted(group.commands.items()):
        for param in command.params:
            if param.param_type_name != "option":
                continue
            # typer >= 0.24 keeps the range on its own option class; click's IntRange/FloatRange on the type
            low = getattr(param, "min", None)
            if low is None:
                low = getattr(getattr(param, "type", None), "min", None)
            if low is not None:
                found.append((name, param.opts[0], str(low - 1)))
            elif param.opts[0] == "--timeout" and param.callback is not None:
                found.append((name, "--timeout", "0"))
    return found


RANGED = _ranged_options()


def test_the_sweep_finds_the_ranged_options():
    assert {("gate", "--pairs"), ("freeze", "--max-rounds"), ("gate", "--timeout"), ("mcp", "--tool-timeout")} <= {
        (c, o) for c, o, _ in RANGED}


@pytest.mark.parametrize(("command", "option", "value"), RANGED, ids=[f"{c} {o}" for c, o, _ in RANGED])
def test_an_out_of_range_option_is_one_error_line(cli, command, option, value):
    code, out, err = cli(command, option, value)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: Invalid value for '{option}'"), err
    assert f"(see `ascendopt {command} --help`)" in err and "Usage:" not in err and "Try " not in err


def test_usage_errors_in_a_child_process_and_in_the_envelope():
    for args, needle in ((["gate", "--pairs", "0"], "'--pairs'"), (["gate", "--timeout", "0"], "'--timeout'"),
                         (["env", "--no-such-option"], "No such option: --no-such-option")):
        proc = subprocess.run([sys.executable, "-m", "ascendopt", *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and needle in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "gate", "--pairs", "0", "--json"], capture_output=True,
                          text=True, timeout=120)
    from _cli_json import json_envelope

    envelope = json_envelope(proc.stdout)
    assert proc.returncode == 2 and envelope["error"]["kind"] == "usage" and envelope["error"]["where"] == "--pairs"


def test_no_arguments_still_prints_the_help(cli):
    code, out, err = cli()
    assert "Usage:" in out + err and "error:" not in err


def test_plural():
    assert [console.plural(n, "launch") for n in (0, 1, 2)] == ["0 launches", "1 launch", "2 launches"]
    assert console.plural(1, "entry", "entries") == "1 entry" and console.plural(3, "entry", "entries") == "3 entries"
    assert console.plural(2, "kernel") == "2 kernels"


def test_counted_messages_agree_with_their_count():
    from ascendopt.lint import precheck

    assert precheck.verdict({"launches": [{"kernel": "a", "status": "lowered"}]}) == "lowers (1 launch)"
    assert precheck.verdict({"launches": [{"kernel": "a", "status": "lowered"}] * 2}) == "lowers (2 launches)"


@pytest.mark.parametrize(("us", "text"), [
    (0.5, "0.50 us"), (812.4, "812.40 us"), (999.994, "999.99 us"), (1000.0, "1.00 ms"), (120721.03, "120.72 ms"),
    (999.996, "1.00 ms"), (999_999.0, "1.00 s"), (3_070_000.0, "3.07 s"), (-2500.0, "-2.50 ms"), (None, "-"),
])
def test_duration_text_picks_the_unit_by_magnitude(us, text):
    assert console.duration_text(us) == text


def test_a_spread_and_a_change_share_the_unit_of_their_median():
    from ascendopt.cli.render import target_metric_line
    from ascendopt.judge.bench import summarize

    assert console.spread_text(120721.03, 118200.0, 121050.0) == "120.72 ms [p20 118.20, p80 121.05]"
    timing = summarize([120.0, 121.0, 119.0, 120.5])  # ms
    assert timing.spread_text().startswith("120.25 ms [p20 ") and " us" not in timing.spread_text()
    line = target_metric_line({"name": "duration_us", "before": 120721.03, "after": 110000.0, "direction": "down",
                               "change_rel": -0.0888, "change_abs": -10721.03, "moved": True, "judgement": "beyond"})
    assert "120.72 ms -> 110.00 ms: down 8.9% (-10.72 ms)" in line


def test_junit_names_are_relative_to_the_project_root(tmp_path):
    from ascendopt.gate.result import GateResult
    from ascendopt.judge.result import Check, StageResult

    root = tmp_path / "checkout"
    checks = [Check(f"{root}/.ascendopt/contract.yaml", True, "digest matches"),
              Check(f"{root}/tests/test_op.py::test_a[shape0]", False, "assert 1 == 2"),
              Check("/elsewhere/file.py", True)]
    result = GateResult([StageResult("integrity", "fail", "x", checks)])
    names = [case.get("name") for case in ET.fromstring(result.to_junit(str(root))).iter("testcase")]
    assert names == [".ascendopt/contract.yaml", "tests/test_op.py::test_a[shape0]", "/elsewhere/file.py"]
    # two checkouts of one project write the same names
    other = GateResult([StageResult("integrity", "fail", "x", [
        Check(c.name.replace(str(root), str(tmp_path / "other")), c.passed, c.message) for c in checks])])
    assert other.to_junit(str(tmp_path / "other")) == result.to_junit(str(root))
