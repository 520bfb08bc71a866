"""`ascendopt mcp`: the loop's commands as MCP tools, driven through the official SDK's own client.

In-process (``mcp.Client`` on the server object: the SDK's memory transport) for the tool list and the calls;
one test starts ``python -m ascendopt mcp`` and talks to it over stdio. Each tool call runs the real command in
a child process, so these are end-to-end: a real profile fixture, a real CPU contract frozen by the CLI.
"""

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from _cli_json import json_payload
from ascendopt.cli import COMMANDS, envelope
from ascendopt.cli import mcp as mcp_cli
from conftest import DATA, run_cli

PROFILE = DATA / "ascend" / "level1_cnn"


def _call(name: str, arguments: dict, *, timeout_s: float = 600):
    """Call one tool on a fresh in-process server: ``(CallToolResult, envelope)``; the envelope is validated."""

    async def go():
        async with Client(mcp_cli.build_server(timeout_s=timeout_s)) as client:
            return await client.call_tool(name, arguments)

    result = anyio.run(go)
    env = result.structured_content
    assert json.loads(result.content[0].text) == env  # the same envelope as text and as structured content
    envelope.validate(env)
    assert result.is_error == (env["exit_code"] != 0)
    return result, env


def test_tools_are_the_registered_loop_commands_with_their_options():
    async def go():
        async with Client(mcp_cli.build_server()) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in anyio.run(go)}
    registered = {name for _, name in COMMANDS}
    assert set(tools) == set(mcp_cli.TOOL_COMMANDS) & registered  # status appears once its command is registered
    assert {"freeze", "analyze", "gate", "optimize-round", "reprofile", "report"} <= set(tools)
    assert not {"demo", "env", "mcp"} & set(tools)
    gate = tools["gate"].input_schema
    assert gate["properties"]["skip_perf"]["type"] == "boolean" and gate["properties"]["pairs"]["type"] == "integer"
    assert gate["properties"]["set"] == {"type": "array", "items": {"type": "string"},
                                         "description": gate["properties"]["set"]["description"]}
    assert "json" not in gate["properties"]  # the server always asks for the envelope
    analyze = tools["analyze"].input_schema
    assert analyze["required"] == ["paths"] and analyze["properties"]["paths"]["type"] == "array"
    # --hypothesis is required except with --auto (the search is the hypothesis): the CLI checks it (exit 2)
    rounds = tools["optimize-round"].input_schema
    assert rounds["required"] == [] and rounds["properties"]["hypothesis"]["type"] == "string"


def test_analyze_on_a_real_profile_is_bounded_with_the_full_result_in_a_file():
    result, env = _call("analyze", {"paths": [str(PROFILE)]})
    assert env["status"] == "ok" and env["command"] == "analyze"
    full = json_payload(run_cli("analyze", str(PROFILE), "--json")[1])
    truncated = env.get("truncated")
    if len(json.dumps(dict(env, data=full, truncated=None))) > mcp_cli.MAX_RESULT_CHARS:
        assert truncated and len(result.content[0].text) <= mcp_cli.MAX_RESULT_CHARS * 1.2  # indent adds a little
        spilled = json.loads(Path(truncated["path"]).read_text())
        assert spilled["data"] == full  # the file holds the whole result
        kept = env["data"]["kernels"]
        # the first kernels, in order (their own long lists are cut too)
        assert 0 < len(kept) < len(full["kernels"])
        assert [k["name"] for k in kept] == [k["name"] for k in full["kernels"][: len(kept)]]
    else:
        assert truncated is None and env["data"] == full


def test_bounded_leaves_a_short_result_alone_and_cuts_a_long_one(tmp_path):
    short = envelope.build("kernels", 0, data={"schema": 1, "kernels": []})
    assert mcp_cli.bounded(short, spill_dir=tmp_path) == short
    long = envelope.build("lint", 1, data={"schema": 1, "files_checked": 500, "errors": [], "findings": [
        {"path": f"k{i}.py", "line": i, "col": 1, "rule": "AO101", "message": "x" * 100} for i in range(500)]})
    cut = mcp_cli.bounded(long, limit=5_000, spill_dir=tmp_path)
    envelope.validate(cut)
    assert len(json.dumps(cut)) <= 5_000 and cut["data"]["findings"] == long["data"]["findings"][: 20]
    assert json.loads(Path(cut["truncated"]["path"]).read_text()) == long


def test_gate_on_a_cpu_contract(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("freeze", "--kernel", "rms_norm", "--shapes", "tiny", "--mode", "fwd", "--dtype", "fp32",
                           "--no-profile", "-w", str(tmp_path / "ws"))
    assert code == 0, err
    _, env = _call("gate", {"workspace": str(tmp_path / "ws"), "skip_perf": True})
    assert (env["status"], env["exit_code"], env["data"]["passed"]) == ("ok", 0, True)
    assert [s["status"] for s in env["data"]["stages"]] == ["pass", "pass", "pass", "skipped"]
    assert env["next"][0].startswith(f"ascendopt optimize-round -w {tmp_path / 'ws'} --hypothesis ")


def test_status_says_where_the_loop_stands(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("freeze", "--kernel", "rms_norm", "--shapes", "tiny", "--mode", "fwd", "--dtype", "fp32",
                           "--no-profile", "-w", str(tmp_path / "ws"))
    assert code == 0, err
    _, env = _call("status", {"workspace": str(tmp_path / "ws")})
    assert (env["status"], env["exit_code"]) == ("ok", 0)
    data = env["data"]
    assert (data["contract"]["kind"], data["contract"]["target"], data["contract"]["digest_ok"]) == \
        ("kernel", "rms_norm", True)
    assert data["rounds"]["count"] == 0 and data["rounds"]["best"] is None and not data["stop"]["stop"]


def test_a_failing_call_returns_an_error_envelope(tmp_path):
    result, env = _call("gate", {"workspace": str(tmp_path / "nothing-frozen")})
    assert result.is_error and (env["exit_code"], env["status"], env["error"]["kind"]) == (2, "error", "usage")
    assert "no contract" in env["error"]["message"] and env["data"] is None
    result, env = _call("ub", {"tile": "BT=64", "mult": 3, "bogus": 1})
    assert result.is_error and env["exit_code"] == 2 and env["error"]["where"] == "arguments"
    assert "bogus" in env["error"]["message"]
    result, env = _call("no-such-tool", {})
    assert result.is_error and env["exit_code"] == 2 and env["error"]["where"] == "name"


def test_a_call_past_the_time_limit_is_stopped_and_says_so(tmp_path):
    marker = tmp_path / "started"
    workload = tmp_path / "sleepy.py"
    workload.write_text(textwrap.dedent(f"""
        import pathlib, time
        pathlib.Path({str(marker)!r}).write_text("1")

        def workload():
            time.sleep(300)
    """))
    started = time.monotonic()
    _, env = _call("collect", {"exec_file": str(workload), "out_dir": str(tmp_path / "p")}, timeout_s=20)
    assert time.monotonic() - started < 20 + mcp_cli.TERM_GRACE_S + 30
    assert marker.exists(), "the workload never ran"
    assert (env["exit_code"], env["status"], env["error"]["kind"]) == (143, "interrupted", "terminated")
    assert env["error"]["message"].startswith("tool call ran past the server's limit of 20 s")


def test_stdio_server_lists_and_calls_tools():
    # the SDK hands a server only a few safe variables by default: pass ours (the backend, the source path)
    params = StdioServerParameters(command=sys.executable, args=["-m", "ascendopt", "mcp"], env=dict(os.environ))

    async def go():
        async with Client(params) as client:
            tools = await client.list_tools()
            result = await client.call_tool("kernels", {"name": "rms_norm"})
            return [t.name for t in tools.tools], result

    names, result = anyio.run(go)
    assert "analyze" in names and "gate" in names
    env = result.structured_content
    envelope.validate(env)
    assert env["status"] == "ok" and env["data"]["kernels"][0]["name"] == "rms_norm"


def test_without_the_sdk_it_is_exit_5_with_one_line(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp.server", None)  # as if the optional extra were not installed
    code, out, err = cli("mcp")
    assert code == 5 and out == ""
    assert err.strip() == ("error: ascendopt mcp needs the Model Context Protocol SDK, which is not installed "
                           "(pip install 'ascendopt[mcp]')")


@pytest.mark.parametrize("arguments, argv", [
    ({"paths": ["a", "b"], "top": 3}, ["analyze", "--top", "3", "--", "a", "b"]),
    ({"skip_perf": True, "set": ["BT=4", "BD=8"], "workspace": "w"},
     ["gate", "--skip-perf", "--set", "BT=4", "--set", "BD=8", "--workspace", "w"]),
    ({"skip_perf": False, "pairs": None}, ["gate"]),
])
def test_arguments_become_the_command_line(arguments, argv):
    specs = {spec.name: spec for spec in mcp_cli.tool_specs()}
    assert specs[argv[0]].argv(arguments) == argv
