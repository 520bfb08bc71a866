"""The manual's agent transcript (docs/agents.md, "A transcript") is what the commands print.

The block between ``<!-- transcript -->`` and ``<!-- /transcript -->`` holds steps: a ``$ ascendopt ... --json``
command line or an ``mcp> {"name": ..., "arguments": ...}`` tool call, then the envelope it printed (the CLI's
stdout; the MCP result's structured content) and ``[exit N]``. The test runs every step, renders the block again
and asserts it equals the page's; ``ASCENDOPT_WRITE_TRANSCRIPT=1`` writes the rendered block instead (after a
deliberate change of the output).
"""

import json
import os
import re
import shlex

import anyio
from mcp import Client

from _cli_json import json_envelope
from ascendopt.cli import envelope
from ascendopt.cli import mcp as mcp_cli
from conftest import TESTS, run_cli

PAGE = TESTS.parent / "docs" / "agents.md"
BLOCK = re.compile(r"(<!-- transcript -->\n```console\n)(.*?)(```\n<!-- /transcript -->)", re.DOTALL)
CLI_STEP, MCP_STEP = "$ ", "mcp> "


def _steps(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.startswith((CLI_STEP, MCP_STEP))]


def _run(step: str) -> tuple[str, int]:
    """What one step prints: ``(envelope JSON as the CLI prints it, exit code)``."""
    if step.startswith(CLI_STEP):
        words = shlex.split(step[len(CLI_STEP):])
        assert words[0] == "ascendopt" and "--json" in words, step
        code, out, _ = run_cli(*words[1:])
        json_envelope(out)  # valid against the schemas
        return out, code
    call = json.loads(step[len(MCP_STEP):])

    async def go():
        async with Client(mcp_cli.build_server(timeout_s=300)) as client:
            return await client.call_tool(call["name"], call["arguments"])

    env = anyio.run(go).structured_content
    envelope.validate(env)
    return json.dumps(env, indent=2) + "\n", env["exit_code"]


def render(steps: list[str]) -> str:
    parts = []
    for step in steps:
        out, code = _run(step)
        parts.append(f"{step}\n{out}[exit {code}]\n")
    return "".join(parts)


def test_readme_transcript_is_what_the_commands_print():
    text = PAGE.read_text(encoding="utf-8")
    match = BLOCK.search(text)
    assert match, f"{PAGE}: the transcript block (<!-- transcript --> ... <!-- /transcript -->) is missing"
    steps = _steps(match.group(2))
    assert any(s.startswith(CLI_STEP) for s in steps) and any(s.startswith(MCP_STEP) for s in steps)
    rendered = render(steps)
    if os.environ.get("ASCENDOPT_WRITE_TRANSCRIPT") == "1":
        PAGE.write_text(text[: match.start(2)] + rendered + text[match.end(2):], encoding="utf-8")
    assert match.group(2) == rendered
