"""The ``--json`` envelope: one object on stdout for every command and every outcome, valid against the
shipped JSON Schemas (``ascendopt/cli/schemas``).

Success outputs of the long commands (freeze, collect, gate, optimize-round, reprofile, demo) are validated
by their own tests, which read ``--json`` through ``_cli_json.json_payload`` (it validates every envelope);
here: every command has a schema, the cheap commands' success and failure outputs, and the boundary's own
outcomes (a click usage error before the command runs, an internal error, a stray print).
"""

import json

import jsonschema
import pytest

from _cli_json import json_envelope, json_payload
from ascendopt.cli import COMMANDS, envelope
from conftest import DATA

PROFILE = DATA / "ascend" / "level1_cnn"
OTHER_PROFILE = DATA / "ascend" / "level0_cnn"


def _envelope(cli, *args):
    code, out, err = cli(*args)
    env = json_envelope(out)  # validated against the envelope schema and the command's data schema
    assert env["exit_code"] == code, err
    return env, err


def test_every_command_has_a_data_schema_and_every_schema_a_command():
    commands = {name for _, name in COMMANDS} - {"mcp"}  # mcp serves a protocol, it prints no envelope
    # events.schema.json: one line of the --events stream, not a command's data
    assert set(envelope.schema_names()) == commands | {envelope.ENVELOPE_SCHEMA, "events"}
    for name in envelope.schema_names():
        schema = envelope.schema(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$id"] == f"urn:ascendopt:schema:{envelope.SCHEMA_VERSION}:{name}"


@pytest.mark.parametrize("args", [
    ("env", "--json"),
    ("kernels", "--json"),
    ("kernels", "rms_norm", "--json"),
    ("ub", "--tile", "BT=64,BD=128", "--mult", "3", "--json"),
    ("ub", "--tile", "BT=64", "--mult", "3", "--solve", "BT", "--json"),
    ("lint", str(DATA.parent / "lint"), "--json"),
    ("lint", "--list-rules", "--json"),
    ("lint", "--explain", "AO101", "--json"),
    ("analyze", str(PROFILE), "--json"),
    ("analyze", str(PROFILE), "--list", "--json"),
    ("analyze", str(PROFILE), "--compare", str(OTHER_PROFILE), "--json"),
])
def test_success_outputs_are_ok_envelopes(cli, args):
    env, _ = _envelope(cli, *args)
    assert (env["status"], env["exit_code"], env["error"], env["command"]) == ("ok", 0, None, args[0])
    assert env["data"] is not None


@pytest.mark.parametrize("args, code, kind", [
    (("ub", "--tile", "BT=1024,BD=1024", "--mult", "3", "--json"), 1, "correctness"),  # overflows the UB
    (("ub", "--tile", "BT=x", "--mult", "3", "--json"), 2, "usage"),
    (("lint", str(DATA / "ascend" / "missing.py"), "--json"), 2, "usage"),
    (("analyze", str(DATA / "no-such-profile"), "--json"), 2, "usage"),
    (("kernels", "no_such_kernel", "--json"), 2, "usage"),
    (("gate", "--pairs", "3", "--json"), 2, "usage"),  # click refuses it before the command runs
    (("gate", "--no-such-option", "--json"), 2, "usage"),
    (("freeze", "--kernel", "rms_norm", "--exec-file", "x.py", "--json"), 2, "usage"),
    (("collect", "--json"), 2, "usage"),
    (("report", "--json"), 2, "usage"),  # no contract in the workspace
    (("reprofile", "--json"), 2, "usage"),
    (("optimize-round", "--hypothesis", "x", "--json"), 2, "usage"),
    (("demo", "--kernel", "no_such_kernel", "--json"), 2, "usage"),
    (("--backend", "npu", "env", "--json"), 5, "environment"),
])
def test_failure_outputs_are_error_envelopes(cli, tmp_path, monkeypatch, args, code, kind):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASCENDOPT_WORKSPACE", raising=False)
    env, err = _envelope(cli, *args)
    assert env["exit_code"] == code and env["error"]["kind"] == kind
    assert env["status"] == ("fail" if code == 1 else "error")
    if code != 1:  # the one error line on stderr says the same (ub's overflow is its table, no error line)
        assert env["error"]["message"].split(" (")[0] in err


def test_usage_error_names_the_option(cli):
    env, _ = _envelope(cli, "gate", "--pairs", "3", "--json")
    assert env["error"]["where"] == "--pairs" and env["error"]["hint"] == "ascendopt gate --help"
    assert env["data"] is None and env["command"] == "gate"


def test_internal_error_is_exit_70_with_where(cli, monkeypatch):
    from ascendopt.device import backends

    def broken(_backend):
        raise RuntimeError("planted bug")

    monkeypatch.setattr(backends, "describe", broken)
    env, err = _envelope(cli, "env", "--json")
    assert (env["exit_code"], env["status"], env["error"]["kind"]) == (70, "error", "internal")
    assert env["error"]["message"] == "RuntimeError: planted bug"
    assert env["error"]["where"].endswith("in broken") and "test_envelope.py" in env["error"]["where"]
    assert "Traceback" in err


def test_stdout_carries_only_the_envelope(cli, monkeypatch):
    from ascendopt.device import backends

    describe = backends.describe

    def chatty(backend):
        print("a stray print from somewhere")  # noqa: T201 - the point of the test
        return describe(backend)

    monkeypatch.setattr(backends, "describe", chatty)
    code, out, err = cli("env", "--json")
    assert code == 0 and json_payload(out)["backend"] == "cpu"
    assert "a stray print" in err and "a stray print" not in out


def test_text_next_line_and_envelope_next_are_the_same_steps(cli):
    code, _, err = cli("kernels", "rms_norm")
    assert code == 0
    env, _ = _envelope(cli, "kernels", "rms_norm", "--json")
    assert env["next"] == ["ascendopt freeze --kernel rms_norm"]
    (line,) = [line for line in err.splitlines() if line.startswith("next: ")]
    assert [part.split("`")[1] for part in line[len("next: "):].split("; then ")] == env["next"]


def test_help_and_text_output_print_no_envelope(cli):
    code, out, _ = cli("env", "--json", "--help")
    assert code == 0 and out.startswith("Usage:")
    code, out, _ = cli("ub", "--tile", "BT=64", "--mult", "3")
    assert code == 0 and not out.lstrip().startswith("{")


def test_validation_rejects_a_wrong_payload():
    good = envelope.build("ub", 0, data=None)
    envelope.validate(good)
    with pytest.raises(jsonschema.ValidationError):
        envelope.validate(dict(good, data={"schema": 1, "chip": "x"}))  # required fields missing
    with pytest.raises(jsonschema.ValidationError):
        envelope.validate(dict(good, exit_code=4))  # a failure without its error
    with pytest.raises(jsonschema.ValidationError):
        envelope.validate(dict(good, extra=1))


def test_json_payload_requires_the_envelope():
    with pytest.raises(AssertionError, match="not a --json envelope"):
        json_payload(json.dumps({"schema": 1, "kernels": []}))


def test_the_loop_in_envelopes_freeze_gate_report(cli, tmp_path, monkeypatch):
    """freeze -> gate -> report as an agent drives them: each prints a valid envelope whose ``next`` leads on."""
    import _gate_kernels as gk

    gk.install(monkeypatch)
    monkeypatch.chdir(tmp_path)
    ws = tmp_path / "ws"
    freeze, err = _envelope(cli, "freeze", "--kernel", "t_scale", "--mode", "fwd", "--no-profile", "-w", str(ws),
                            "--json")
    assert freeze["status"] == "ok" and freeze["data"]["contract"] == str(ws / "contract.yaml"), err
    assert f"ascendopt gate -w {ws}" in freeze["next"]
    gate, err = _envelope(cli, "gate", "--skip-perf", "-w", str(ws), "--json")
    assert gate["status"] == "ok" and gate["data"]["passed"], err
    assert gate["next"][0].startswith(f"ascendopt optimize-round -w {ws} --hypothesis ")
    assert gate["next"][0].endswith("--set NAME=VALUE")  # a bundled kernel's round changes a tunable
    report, err = _envelope(cli, "report", "-w", str(ws), "--json")
    assert report["status"] == "ok" and report["data"]["rounds"] == 0, err
    assert (ws / "report.md").exists()
