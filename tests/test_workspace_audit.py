"""The audit log ``.ascendopt/log.jsonl`` and workspace discovery (``ascendopt.workspace``).

Real files, real ``flock`` and real forked processes; no kernel runs here (the gate's use of the log is
tests/gate/test_gate_ledger.py).
"""

import json
import multiprocessing as mp
import os
import subprocess
from pathlib import Path

import pytest

from ascendopt.errors import UsageError
from ascendopt.workspace import (
    Workspace,
    adopt,
    append_log,
    atomic_write_text,
    check_ledger,
    read_log,
    sha256_file,
)


def _lines(ws):
    return ws.log_path.read_text().splitlines()


def test_a_lock_session_logs_what_it_wrote_with_digests_and_exit_code(tmp_path):
    ws = Workspace(tmp_path / ".ascendopt")
    with ws.lock() as session:
        session.event = "freeze"  # what freeze marks its session with: the contract's origin
        atomic_write_text(ws.contract_path, "schema: 1\n")
        atomic_write_text(ws.profiles_dir / "p1" / "deep" / "trace.json", "{}")
    with ws.lock():
        pass  # wrote nothing: no entry
    with pytest.raises(UsageError):
        with ws.lock() as session:
            session.exit_code = 0
            atomic_write_text(ws.round_path(1), "schema: 1\n")
            raise UsageError("planted")
    log = read_log(ws)
    assert log.problems == [] and log.torn == []
    first, second = log.entries
    assert first["wrote"] == {"contract.yaml": sha256_file(ws.contract_path),
                              "profiles/p1/": first["wrote"]["profiles/p1/"]}  # a folder is one key
    assert len(first["wrote"]["profiles/p1/"]) == 64 and first["prev"] is None
    assert first["result"] == "ok" and first["exit_code"] == 0 and first["pid"] == os.getpid()
    assert first["event"] == "freeze" and "event" not in second
    assert second["result"] == "error" and second["exit_code"] == 2 and second["error"] == "planted"
    assert list(second["wrote"]) == ["rounds/0001.yaml"] and second["prev"] == first["digest"]
    assert check_ledger(ws).problems == []


def test_a_signal_during_a_write_is_logged_with_the_exit_code_the_process_gives(tmp_path):
    """SIGTERM / SIGINT reach a command as cli.exits.Interrupted (a BaseException): the entry says 143 / 130,
    the codes the process exits with, not an internal error."""
    import signal

    from ascendopt.cli.exits import Interrupted

    ws = Workspace(tmp_path / ".ascendopt")
    for signum in (signal.SIGTERM, signal.SIGINT):
        with pytest.raises(Interrupted):
            with ws.lock():
                atomic_write_text(ws.round_path(signum), "schema: 1\n")
                raise Interrupted(signum)
    codes = [(e["exit_code"], e["result"]) for e in read_log(ws).entries]
    assert codes == [(143, "error"), (130, "error")]


def test_the_cli_records_its_command_line(tmp_path, cli):
    ws = Workspace(tmp_path / ".ascendopt")
    atomic_write_text(tmp_path / "r.md", "x")
    code, _, err = cli("report", "-w", str(ws.root))  # no contract: nothing written, no entry
    assert code == 2 and not ws.log_path.exists()
    with ws.lock():
        atomic_write_text(ws.contract_path, "schema: 1\n")
    from ascendopt.workspace import set_invocation

    set_invocation(["optimize-round", "--hypothesis", "two words"])
    try:
        with ws.lock():
            atomic_write_text(ws.round_path(1), "schema: 1\n")
    finally:
        set_invocation(None)
    assert read_log(ws).entries[-1]["command"] == "ascendopt optimize-round --hypothesis 'two words'"


def test_edited_or_removed_log_lines_break_the_chain(tmp_path):
    ws = Workspace(tmp_path / ".ascendopt")
    for n in range(3):
        append_log(ws, {"command": f"c{n}", "wrote": {}})
    lines = _lines(ws)
    edited = json.loads(lines[1])
    edited["command"] = "something else"
    ws.log_path.write_text("\n".join([lines[0], json.dumps(edited), lines[2]]) + "\n")
    assert read_log(ws).problems == [f"{ws.log_path}: line 2: edited by hand (its digest does not match its content)"]
    ws.log_path.write_text("\n".join([lines[0], lines[2]]) + "\n")  # the middle entry deleted
    assert read_log(ws).problems == [f"{ws.log_path}: line 2: the entry before it was removed or edited (chain "
                                     "broken)"]
    ws.log_path.write_text("\n".join(lines) + "\n")
    assert read_log(ws).problems == []


def test_a_torn_last_line_is_skipped_and_the_next_append_chains_past_it(tmp_path):
    ws = Workspace(tmp_path / ".ascendopt")
    append_log(ws, {"command": "a"})
    whole = ws.log_path.read_bytes()
    ws.log_path.write_bytes(whole + whole[: len(whole) // 2])  # a writer killed mid-line
    log = read_log(ws)
    assert [e["command"] for e in log.entries] == ["a"] and log.torn == [2] and log.problems == []
    assert any("torn" in note for note in check_ledger(ws).notes)
    append_log(ws, {"command": "b"})
    log = read_log(ws)
    assert [e["command"] for e in log.entries] == ["a", "b"] and log.torn == [2] and log.problems == []
    assert log.entries[1]["prev"] == log.entries[0]["digest"] and log.entries[1]["line"] == 3


def _append_many(root: str, tag: str, count: int) -> None:
    ws = Workspace(Path(root))
    for n in range(count):
        append_log(ws, {"command": f"{tag}{n}"})


def test_concurrent_writers_serialize_on_the_workspace_lock(tmp_path):
    ws = Workspace(tmp_path / ".ascendopt")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(ws.root), tag, 40)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    log = read_log(ws)
    assert log.problems == [] and log.torn == []
    commands = [e["command"] for e in log.entries]
    assert sorted(commands) == sorted([f"a{n}" for n in range(40)] + [f"b{n}" for n in range(40)])


def test_a_killed_writer_leaves_the_log_readable(tmp_path):
    """SIGKILL a process in the middle of appending (its os.write is slowed down to a crawl) and read."""
    ws = Workspace(tmp_path / ".ascendopt")
    append_log(ws, {"command": "before"})
    script = (
        "import os, sys, time\n"
        "import ascendopt.workspace as w\n"
        "real = os.write\n"
        "def slow(fd, data):\n"
        "    real(fd, data[:40]); os.fsync(fd); print('half', flush=True); time.sleep(60); return real(fd, data[40:])\n"
        "w.os.write = slow\n"
        f"w.append_log(w.Workspace(w.Path({str(ws.root)!r})), {{'command': 'killed'}})\n"
    )
    proc = subprocess.Popen(["python", "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "half"
    finally:
        proc.kill()
        proc.wait(10)
    log = read_log(ws)
    assert [e["command"] for e in log.entries] == ["before"] and log.torn == [2]
    append_log(ws, {"command": "after"})
    assert [e["command"] for e in read_log(ws).entries] == ["before", "after"] and read_log(ws).problems == []


def test_a_legacy_workspace_is_an_integrity_failure_until_adopted_explicitly(tmp_path):
    """A contract without its audit log (an older ascendopt's workspace) is exit 3, not a note; a later write
    does not adopt it quietly (the contract's origin is still no freeze); ``adopt`` does, once."""
    ws = Workspace(tmp_path / ".ascendopt")
    atomic_write_text(ws.contract_path, "schema: 1\nintegrity: {}\n")  # written by an ascendopt without a log
    audit = check_ledger(ws)
    assert audit.notes == [] and len(audit.problems) == 1
    assert audit.problems[0][1].startswith(f"{ws.log_path}: missing: contract.yaml exists without the audit log")
    with ws.lock():
        atomic_write_text(ws.round_path(1), "schema: 1\n")
    (entry,) = read_log(ws).entries
    assert entry["adopted"] == {"contract.yaml": sha256_file(ws.contract_path)} and "starts here" in entry["note"]
    assert [p for p, _ in check_ledger(ws).problems] == [str(ws.contract_path)]  # not by a freeze
    result = adopt(ws)
    assert result["entry"] == 2 and "contract.yaml" in result["adopted"] and len(result["accepted"]) == 1
    assert read_log(ws).entries[-1]["event"] == "adopt" and check_ledger(ws).problems == []
    assert adopt(ws) == {"adopted": {}, "accepted": [], "entry": None}  # nothing left to adopt
    ws.contract_path.write_text("schema: 1\nop: edited\n")
    assert check_ledger(ws).problems == [(str(ws.contract_path), f"{ws.contract_path}: edited by hand since "
                                          "ascendopt wrote it (log.jsonl line 2)")]


def test_ledger_files_added_or_removed_by_hand(tmp_path):
    ws = Workspace(tmp_path / ".ascendopt")
    with ws.lock():
        atomic_write_text(ws.round_path(1), "schema: 1\n")
    atomic_write_text(ws.tune_cache_path, "{}")  # not through ascendopt
    ws.round_path(1).unlink()
    problems = dict(check_ledger(ws).problems)
    assert problems == {str(ws.tune_cache_path): f"{ws.tune_cache_path}: not in the audit log log.jsonl (written "
                                                 "outside ascendopt)",
                        str(ws.round_path(1)): f"{ws.round_path(1)}: removed by hand (log.jsonl line 1 recorded it)"}


# -- discovery ----------------------------------------------------------------------------------


def test_the_workspace_is_found_from_a_subdirectory_up_to_the_git_root(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ASCENDOPT_WORKSPACE", raising=False)
    repo = tmp_path / "repo"
    deep = repo / "src" / "pkg"
    deep.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / ".ascendopt").mkdir()
    monkeypatch.chdir(deep)
    assert Workspace.resolve().root == repo / ".ascendopt"
    assert f"workspace: {repo / '.ascendopt'} (found above {deep})" in capsys.readouterr().err
    monkeypatch.chdir(repo)
    assert Workspace.resolve().root == repo / ".ascendopt" and capsys.readouterr().err == ""
    # the search stops at the git root: a workspace above another repository is not this one's
    (tmp_path / ".ascendopt").mkdir()
    (repo / ".ascendopt").rmdir()
    monkeypatch.chdir(deep)
    assert Workspace.resolve().root == deep / ".ascendopt"  # none found: freeze creates it here
    assert Workspace.resolve("elsewhere").root == deep / "elsewhere"
    monkeypatch.setenv("ASCENDOPT_WORKSPACE", str(tmp_path / "env"))
    assert Workspace.resolve().root == tmp_path / "env"


def _write_and_hold(root: str, ready, release) -> None:
    ws = Workspace(Path(root))
    with ws.lock():
        atomic_write_text(ws.round_path(2), "schema: 1\n")  # written, not logged until the lock is released
        ready.set()
        release.wait(10)


def test_a_writer_in_another_process_is_not_judged_mid_write(tmp_path):
    ws = Workspace(tmp_path / ".ascendopt")
    with ws.lock():
        atomic_write_text(ws.round_path(1), "schema: 1\n")
    ctx = mp.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_write_and_hold, args=(str(ws.root), ready, release))
    proc.start()
    try:
        assert ready.wait(10)
        audit = check_ledger(ws)
        assert audit.problems == [] and any("another command is writing" in note for note in audit.notes)
    finally:
        release.set()
        proc.join(10)
    assert proc.exitcode == 0
    audit = check_ledger(ws)  # released: its write is logged, and the ledger matches the log
    assert audit.problems == [] and audit.notes == [] and audit.checked == 2


def _killed_while_writing(root: str) -> None:
    ws = Workspace(Path(root))
    with ws.lock():
        atomic_write_text(ws.round_path(2), "schema: 1\nnumber: 2\n")
        os.kill(os.getpid(), 9)  # SIGKILL: no finally runs, the lock file keeps "pid N"


def test_a_writer_killed_before_logging_is_recovered_by_the_next_writer(tmp_path):
    ws = Workspace(tmp_path / ".ascendopt")
    with ws.lock():
        atomic_write_text(ws.round_path(1), "schema: 1\n")
    proc = mp.get_context("fork").Process(target=_killed_while_writing, args=(str(ws.root),))
    proc.start()
    proc.join(30)
    assert proc.exitcode == -9
    killed = f"pid {proc.pid}"
    assert ws.killed_holder() == killed
    audit = check_ledger(ws)  # not a hand edit: said, not failed
    assert audit.problems == [] and any(f"{killed} was killed while writing" in note and "0002.yaml" in note
                                        for note in audit.notes)
    with ws.lock():
        pass  # the next writer records what the killed one wrote
    entry = read_log(ws).entries[-1]
    assert entry["command"] == f"(recovered: {killed} was killed before it logged its writes)"
    assert entry["wrote"] == {"rounds/0002.yaml": sha256_file(ws.round_path(2))} and entry["exit_code"] == 137
    assert ws.killed_holder() is None and check_ledger(ws) == type(audit)([], [], 2)
    ws.round_path(2).write_text("schema: 1\nnumber: 3\n")  # a hand edit after that is one again
    assert [p for p, _ in check_ledger(ws).problems] == [str(ws.round_path(2))]
