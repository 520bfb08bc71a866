"""README "Optimize your own kernel", run as written: its files written, its shell commands run one by one in
a fresh git repository on the CPU interpreter, then what a user gets checked (the contract, the profile and its
analysis, the round, the JUnit file, the status, the re-profile, the merge-request markdown, what ends up
committed), so the walkthrough cannot drift from the tool."""

import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def _blocks(section: str) -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in FENCE.findall(section)]


def _files(blocks) -> dict[str, str]:
    """Python blocks whose first line names their file (``# scale.py``)."""
    files = {}
    for lang, body in blocks:
        first = body.splitlines()[0]
        if lang == "python" and re.fullmatch(r"# [\w/]+\.py", first):
            files[first[2:]] = body
    return files


def _commands(blocks) -> list[str]:
    return [line.strip() for lang, body in blocks if lang == "bash" for line in body.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def test_the_walkthrough_has_its_parts():
    blocks = _blocks(_section("Optimize your own kernel"))
    assert set(_files(blocks)) == {"scale.py", "tests/test_scale.py", "bench.py"}
    commands = _commands(blocks)
    # the whole loop, in the loop's order
    order = ("ascendopt freeze ", "git add .ascendopt/contract.yaml", "ascendopt collect ", "ascendopt analyze ",
             "ascendopt optimize-round ",
             "ascendopt --backend cpu gate --skip-perf", "ascendopt status", "ascendopt reprofile",
             "ascendopt report ", "git add .ascendopt/log.jsonl .ascendopt/rounds")
    positions = [next((i for i, c in enumerate(commands) if c.startswith(needed)), None) for needed in order]
    assert None not in positions, dict(zip(order, positions, strict=True))
    assert positions == sorted(positions), dict(zip(order, positions, strict=True))
    # the CI job runs the very gate command the walkthrough runs
    ci = next(body for lang, body in blocks if lang == "yaml")
    job = yaml.safe_load(ci)["jobs"]["gate-cpu"]["steps"][-1]["run"].splitlines()
    assert next(c for c in commands if " gate " in c) in job


def test_the_walkthrough_runs_end_to_end_on_cpu(tmp_path):
    blocks = _blocks(_section("Optimize your own kernel"))
    repo = tmp_path / "repo"
    for rel, text in _files(blocks).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "ASCENDOPT_BACKEND",
                                                             "ASCENDOPT_WORKSPACE")}
    env.update(TMPDIR=str(tmpdir), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", COLUMNS="80")
    printed = {}
    for command in _commands(blocks):
        if command.startswith("pip install"):
            continue  # this environment has it installed (and no network): the test checks, not installs
        proc = subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        assert proc.returncode == 0, f"{command}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        printed[command.split(" --")[0]] = proc.stdout + proc.stderr
    ws = repo / ".ascendopt"
    # collect wrote a profile next to freeze's baseline profile, and analyze found the kernel in the newest run
    assert len([p for p in (ws / "profiles").iterdir() if p.is_dir()]) >= 2, list((ws / "profiles").iterdir())
    assert "_scale_kernel" in printed["ascendopt analyze .ascendopt/profiles"]
    contract = yaml.safe_load((ws / "contract.yaml").read_text())
    assert contract["expected_kernels"] == ["_scale_kernel"]
    assert contract["test_set"]["tests"] == {"tests/test_scale.py::test_scale_matches_torch": "passed"}
    round_1 = yaml.safe_load((ws / "rounds" / "0001.yaml").read_text())
    assert round_1["gate"]["passed"] and round_1["verdict"] in ("keep", "revert")
    assert round_1["direction"] == "tiling" and round_1["change"]["kind"] == "code"
    status = printed["ascendopt status"]  # where the loop stands: the round just recorded, with its verdict
    assert "last round" in status and round_1["verdict"] in status and "tiling" in status, status
    junit = ET.parse(repo / "gate-cpu.xml").getroot()
    assert int(junit.get("failures", 0)) == 0 and int(junit.get("errors", 0)) == 0 and junit.iter("testcase")
    markdown = (repo / "mr.md").read_text()
    rows = [line for line in markdown.splitlines() if line.startswith("| 1 | ")]
    assert len(rows) == 1 and "tiling" in rows[0]
    assert (repo / "rounds.png").read_bytes()[:4] == b"\x89PNG"
    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout

    # what the walkthrough says to commit is committed, and only that: the ledger, never the profiles
    assert set(git("ls-files", ".ascendopt").split()) == {".ascendopt/contract.yaml", ".ascendopt/log.jsonl",
                                                          ".ascendopt/.gitignore", ".ascendopt/rounds/0001.yaml"}
    assert git("status", "--porcelain", "--untracked-files=no", ".ascendopt") == ""
    # ascendopt itself never commits on the user's branch: the commits are the walkthrough's own three, and the
    # change stays in the working tree for the user to commit (keep) or undo (revert)
    assert git("log", "--format=%s").split("\n")[:3] == ["ascendopt: round 1", "ascendopt: freeze the scale task",
                                                          "scale op"]
    assert git("status", "--porcelain", "--untracked-files=no") == " M scale.py\n"
    assert not list(tmpdir.glob("ascendopt-*")), list(tmpdir.iterdir())  # nothing left behind in TMPDIR
