"""The judge's git is the judge's: what a repository can configure to change what git sees or runs does not
reach the judge (``process.git_run``, ``ascendopt.vcs``, ``judge.worktrees``).

Each attack class is a small real git repository in ``tmp_path`` configured the way a change that wants a
green gate would configure it. The classes come from the published lists of harness manipulation: KernelGuard
("harness manipulation": the submission changes what the evaluator runs or reads; OpenReview K0dAC7UaXL) and
the hacker-fixer line of work on reward hacking in kernel generation (the evaluator's own tools and state are
part of the attack surface). Controls: an unchanged tree, an honest change committed or not, read the same way.
"""

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from _own_code import git
from _own_code import head as _head
from ascendopt import vcs
from ascendopt.errors import EnvironmentProblem, IntegrityError
from ascendopt.judge.worktrees import checkout, frozen_commit

SLOW = "DELAY_S = 0.008\n"
FAST = "DELAY_S = 0.001\n"


@pytest.fixture
def repo(tmp_path):
    """A committed repository: op.py (the code a round changes), bench.py, tests/test_op.py; frozen at HEAD."""
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "op.py").write_text(SLOW)
    (root / "bench.py").write_text("from op import DELAY_S\n")
    (root / "tests" / "test_op.py").write_text("def test_ok():\n    assert True\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "baseline")
    return root


def _contract(root: Path):
    """What freeze records of the repository (``git_state``), as the contract the gate reads."""
    return SimpleNamespace(git=vcs.commit_state(root), is_kernel=False)


def _baseline_text(root: Path, commit: str, rel: str = "op.py") -> str:
    with checkout(root, commit, "bench.py") as tree:
        return (tree / rel).read_text()


def _hook(path: Path, marker: Path, body: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho ran >> {marker}\n{body}\n")
    path.chmod(0o755)


# -- hooks ----------------------------------------------------------------------------------------


def test_repository_hooks_never_run_for_the_judge(repo, tmp_path):
    """KernelGuard harness manipulation: a post-checkout hook (in .git/hooks and in a core.hooksPath the
    repository names) that rewrites the baseline's code after the judge checks it out; reference-transaction
    and commit hooks on the judge's own snapshot writes."""
    marker = tmp_path / "hook-ran"
    rewrite = "[ -f op.py ] && echo 'DELAY_S = 1.0' > op.py"
    for folder in (repo / ".git" / "hooks", repo / "my-hooks"):
        for name in ("post-checkout", "pre-commit", "post-commit", "reference-transaction", "post-index-change"):
            _hook(folder / name, marker, rewrite)
    frozen = _contract(repo)
    for hooks in (None, "my-hooks"):
        if hooks:
            git(repo, "config", "core.hooksPath", hooks)
        assert _baseline_text(repo, frozen.git["commit"]) == SLOW
        (repo / "op.py").write_text(FAST)
        snap = vcs.snapshot(repo, "refs/ascendopt/rounds/0001", "round 1")
        assert vcs.verify_recorded(repo, snap.commit, reachable=False)["op.py"].data == FAST.encode()
        (repo / "op.py").write_text(SLOW)
    assert not marker.exists()
    assert frozen_commit(frozen, repo) == frozen.git["commit"]


# -- replace refs and grafts ----------------------------------------------------------------------


def test_a_replace_ref_cannot_show_the_frozen_commit_with_other_content(repo):
    """A replace ref (``git replace``) making the frozen commit show a slower baseline, so the candidate looks
    faster: the judge reads the frozen commit's own objects."""
    frozen = _contract(repo)
    commit = frozen.git["commit"]
    (repo / "op.py").write_text("DELAY_S = 1.0\n")
    git(repo, "commit", "-q", "-am", "a much slower op")
    slower = _head(repo)
    git(repo, "reset", "-q", "--hard", commit)
    git(repo, "replace", commit, slower)
    shown = subprocess.run(["git", "show", f"{commit}:op.py"], cwd=repo, capture_output=True, text=True).stdout
    assert shown == "DELAY_S = 1.0\n"  # the repository's own git is fooled
    assert _baseline_text(repo, commit) == SLOW
    assert frozen_commit(frozen, repo) == commit
    assert vcs.commit_state(repo)["tree"] == frozen.git["tree"]  # HEAD read through the replace ref: not


def test_a_graft_cannot_change_what_the_frozen_commit_is(repo):
    """The deprecated info/grafts file and GIT_* environment pointing at another repository or index."""
    frozen = _contract(repo)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "grafts").write_text(f"{frozen.git['commit']}\n")
    other = repo.parent / "other"
    other.mkdir()
    git(other, "init", "-q")
    os.environ["GIT_DIR"] = str(other / ".git")
    os.environ["GIT_INDEX_FILE"] = str(other / "index")
    try:
        assert vcs.head(repo) == frozen.git["commit"]
        assert _baseline_text(repo, frozen.git["commit"]) == SLOW
    finally:
        del os.environ["GIT_DIR"], os.environ["GIT_INDEX_FILE"]


# -- attribute filters ---------------------------------------------------------------------------


def test_a_smudge_or_clean_filter_never_runs(repo, tmp_path):
    """.gitattributes naming a filter whose smudge rewrites the baseline when checked out (and whose clean
    runs on the judge's snapshot): the judge writes and reads the bytes as stored."""
    marker = tmp_path / "filter-ran"
    (repo / ".gitattributes").write_text("*.py filter=slow text eol=crlf\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attributes")
    git(repo, "config", "filter.slow.smudge", f"sh -c 'echo ran >> {marker}; sed s/0.008/1.0/'")
    git(repo, "config", "filter.slow.clean", f"sh -c 'echo ran >> {marker}; cat'")
    git(repo, "config", "filter.slow.required", "true")
    frozen = _contract(repo)
    assert _baseline_text(repo, frozen.git["commit"]) == SLOW  # no smudge, no crlf
    (repo / "op.py").write_text(FAST)
    snap = vcs.snapshot(repo, "refs/ascendopt/rounds/0001", "round 1")
    assert vcs.verify_recorded(repo, snap.commit, reachable=False)["op.py"].data == FAST.encode()
    assert not marker.exists()


# -- index bits and fsmonitor ---------------------------------------------------------------------


@pytest.mark.parametrize("bit", ["--assume-unchanged", "--skip-worktree"])
def test_index_bits_cannot_hide_an_edited_file(repo, bit):
    """assume-unchanged / skip-worktree on an edited file: git status says clean, the judge reads the disk."""
    git(repo, "update-index", bit, "op.py")
    (repo / "op.py").write_text(FAST)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert status == ""  # the repository's own git does not see it
    state = vcs.commit_state(repo)
    assert state["dirty"] is True
    snap = vcs.snapshot(repo, "refs/ascendopt/rounds/0001", "round 1")
    assert snap.tree != state["tree"]
    assert vcs.verify_recorded(repo, snap.commit, reachable=False)["op.py"].data == FAST.encode()


def test_an_fsmonitor_hook_is_not_asked(repo, tmp_path):
    """core.fsmonitor naming a program that reports nothing changed: it never runs, the edit is seen."""
    marker = tmp_path / "fsmonitor-ran"
    _hook(repo / "fsmon.sh", marker, "printf '\\0'")
    git(repo, "config", "core.fsmonitor", str(repo / "fsmon.sh"))
    git(repo, "config", "core.untrackedCache", "true")
    (repo / "op.py").write_text(FAST)
    assert vcs.commit_state(repo)["dirty"] is True
    vcs.snapshot(repo, "refs/ascendopt/rounds/0001", "round 1")
    assert not marker.exists()


# -- the frozen commit's history -------------------------------------------------------------------


def test_a_frozen_commit_rewritten_away_is_integrity_exit_3(repo):
    """History rewritten (amend, then reset) so the frozen commit is no longer the user's: tampering, exit 3."""
    frozen = _contract(repo)
    (repo / "op.py").write_text("DELAY_S = 1.0\n")
    git(repo, "commit", "-q", "--amend", "-am", "baseline (rewritten)")
    with pytest.raises(IntegrityError, match="no longer reachable") as exc:
        frozen_commit(frozen, repo)
    assert exc.value.exit_code == 3
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    with pytest.raises(IntegrityError, match="not in the repository") as exc:
        frozen_commit(frozen, repo)
    assert exc.value.exit_code == 3


def test_a_frozen_commit_whose_recorded_content_changed_is_exit_3(repo):
    """The recorded tree or content digest no longer matches the commit (the record or the objects were
    altered): exit 3; a loose object replaced with other bytes is caught object by object."""
    frozen = _contract(repo)
    frozen.git["tree_digest"] = "0" * 64
    with pytest.raises(IntegrityError, match="content digest recorded"):
        frozen_commit(frozen, repo)
    frozen = _contract(repo)
    blob = subprocess.run(["git", "rev-parse", "HEAD:op.py"], cwd=repo, capture_output=True, text=True).stdout.strip()
    other = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input="DELAY_S = 1.0\n",
                           capture_output=True, text=True).stdout.strip()
    loose = repo / ".git" / "objects"
    target = loose / blob[:2] / blob[2:]
    target.chmod(0o644)
    target.write_bytes((loose / other[:2] / other[2:]).read_bytes())  # op.py's id, other content
    with pytest.raises(IntegrityError, match=r"op\.py\) does not hold the content its id names"):
        frozen_commit(frozen, repo)


def test_a_shallow_clone_without_the_frozen_commit_is_environment_exit_5(repo, tmp_path):
    frozen = _contract(repo)
    (repo / "op.py").write_text(FAST)
    git(repo, "commit", "-q", "-am", "faster")
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(clone)], check=True)
    with pytest.raises(EnvironmentProblem, match="shallow clone") as exc:
        frozen_commit(frozen, clone)
    assert exc.value.exit_code == 5 and "fetch-depth: 0" in exc.value.hint
    full = tmp_path / "full"
    subprocess.run(["git", "clone", "-q", f"file://{repo}", str(full)], check=True)
    assert frozen_commit(frozen, full) == frozen.git["commit"]  # control: a full clone holds it


# -- controls --------------------------------------------------------------------------------------


def test_controls_an_unchanged_tree_and_an_honest_change_committed_or_not(repo):
    """An unchanged tree is clean and its snapshot is HEAD's files; an honest edit is dirty, snapshotted as
    edited, and once committed the user's commit holds the snapshot; the frozen commit stays verified."""
    frozen = _contract(repo)
    assert frozen.git["dirty"] is False
    first = vcs.snapshot(repo, "refs/ascendopt/rounds/0001", "round 1", exclude=[repo / ".ascendopt"])
    assert first.tree == frozen.git["tree"] and first.digest == frozen.git["tree_digest"]
    assert vcs.user_commit_holding(repo, first.commit) == frozen.git["commit"]
    (repo / "op.py").write_text(FAST)
    (repo / "helper.py").write_text("X = 1\n")  # untracked, not ignored: part of the tree
    (repo / ".gitignore").write_text("ignored.bin\n")
    (repo / "ignored.bin").write_bytes(b"\0" * 10)
    second = vcs.snapshot(repo, "refs/ascendopt/rounds/0002", "round 2")
    files = vcs.verify_recorded(repo, second.commit, reachable=False)
    assert sorted(files) == [".gitignore", "bench.py", "helper.py", "op.py", "tests/test_op.py"]
    assert vcs.user_commit_holding(repo, second.commit) is None
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert status.split() == ["M", "op.py", "??", ".gitignore", "??", "helper.py"]  # index untouched
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "faster")
    assert vcs.user_commit_holding(repo, second.commit) == _head(repo)
    assert frozen_commit(frozen, repo) == frozen.git["commit"]
    assert vcs.ref_commit(repo, "refs/ascendopt/rounds/0002") == second.commit


def test_the_users_and_the_systems_git_configuration_is_not_read_but_safe_directory(repo, tmp_path, monkeypatch):
    """A global gitconfig naming hooks, a replace-refs base and a filter: none of it reaches the judge; only
    its safe.directory entries are carried (a CI container whose checkout another user owns needs them)."""
    from ascendopt import process

    marker = tmp_path / "hook-ran"
    _hook(tmp_path / "global-hooks" / "reference-transaction", marker)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {tmp_path / 'global-hooks'}\n"
                                     "[safe]\n\tdirectory = /some/checkout\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setattr(process, "_GLOBAL_CONFIG", {})
    env = process.git_env()
    assert Path(env["GIT_CONFIG_GLOBAL"]).read_text() == "[safe]\n\tdirectory = /some/checkout\n"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_NO_REPLACE_OBJECTS"] == "1"
    vcs.snapshot(repo, "refs/ascendopt/rounds/0001", "round 1")
    assert not marker.exists()
    with pytest.raises(ValueError, match="GIT_DIR"):
        process.git_env({"GIT_DIR": "/elsewhere"})


def test_core_worktree_cannot_point_the_judge_at_another_folder(repo, tmp_path):
    """core.worktree naming a decoy copy of the pristine baseline: the judge's project root, its listing
    and its reading of the tree stay the repository's own folder."""
    from ascendopt.contract.frozen import project_root

    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "op.py").write_text(SLOW)
    git(repo, "config", "core.worktree", str(decoy))
    (repo / "op.py").write_text(FAST)
    (repo / "helper.py").write_text("X = 1\n")
    assert project_root(repo / "tests") == repo.resolve()
    assert vcs.commit_state(repo)["dirty"] is True
    snap = vcs.snapshot(repo, "refs/ascendopt/rounds/0001", "round 1")
    files = vcs.verify_recorded(repo, snap.commit, reachable=False)
    assert files["op.py"].data == FAST.encode() and "helper.py" in files


# -- the reused folder of a recorded commit ----------------------------------------------------------


def test_a_recorded_commits_folder_is_reused_across_commands_when_it_verifies(repo):
    """Control: two checkouts of one commit (two commands) use one folder, outside the repository."""
    commit = _head(repo)
    with checkout(repo, commit, "bench.py") as first:
        assert (first / "op.py").read_text() == SLOW
        (first / "__pycache__").mkdir()  # what the worker's interpreter leaves behind
    with checkout(repo, commit, "bench.py") as second:
        assert second == first and repo not in second.parents
        assert not (second / "__pycache__").exists()


def test_a_reused_folder_edited_between_commands_is_written_again(repo):
    """KernelGuard harness manipulation / Wafer field guide "poison the reference": the code under test edits
    the baseline's folder that the next gate reuses (the baseline made wrong or slow, a file added that the
    baseline then imports, a file made executable). Every edit is found before use and the folder holds the
    commit's files again."""
    commit = _head(repo)
    with checkout(repo, commit, "bench.py") as tree:
        pass
    edits = [lambda t: (t / "op.py").write_text("DELAY_S = 1.0\n"),
             lambda t: (t / "sitecustomize.py").write_text("import time\n"),
             lambda t: (t / "tests" / "test_op.py").chmod(0o755),
             lambda t: (t / "op.py").unlink(),
             lambda t: (t / "op").mkdir()]  # an empty folder: a namespace package named like the module
    for edit in edits:
        edit(tree)
        with checkout(repo, commit, "bench.py") as again:
            assert again == tree
            assert (again / "op.py").read_text() == SLOW
            assert not (again / "sitecustomize.py").exists() and not (again / "op").exists()
            assert not os.access(again / "tests" / "test_op.py", os.X_OK)


def test_planted_bytecode_in_a_reused_folder_never_runs(repo):
    """Wafer field guide "stale or planted artefacts": a ``.pyc`` in the reused folder whose source stamp
    matches op.py (so CPython would load it instead of the source) but whose code says another delay. The
    folder's bytecode caches are deleted before use: the baseline imports the verified source."""
    import py_compile
    import sys

    commit = _head(repo)
    with checkout(repo, commit, "bench.py") as tree:
        pass
    source = tree / "op.py"
    stamp = source.stat()
    source.write_text("DELAY_S = 9.000\n")  # the same size as SLOW's text
    os.utime(source, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    py_compile.compile(str(source), cfile=str(tree / "__pycache__" / f"op.{sys.implementation.cache_tag}.pyc"))
    source.write_text(SLOW)
    os.utime(source, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    planted = subprocess.run([sys.executable, "-c", "import op; print(op.DELAY_S)"], cwd=tree, capture_output=True,
                             text=True, check=True).stdout.strip()
    assert planted == "9.0"  # the plant works on a folder used as it is
    with checkout(repo, commit, "bench.py") as again:
        used = subprocess.run([sys.executable, "-c", "import op; print(op.DELAY_S)"], cwd=again, capture_output=True,
                              text=True, check=True).stdout.strip()
    assert used == "0.008"


def test_a_folder_in_use_by_another_command_is_not_shared(repo):
    """Two commands at once never share (or rewrite) one folder: the second gets a temporary one."""
    commit = _head(repo)
    with checkout(repo, commit, "bench.py") as first, checkout(repo, commit, "bench.py") as second:
        assert first != second and (second / "op.py").read_text() == SLOW
    assert not second.exists() and first.exists()


def test_an_unwritable_cache_falls_back_to_a_temporary_folder(repo, tmp_path, monkeypatch):
    blocked = tmp_path / "cache-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("ASCENDOPT_CACHE", str(blocked))
    with checkout(repo, _head(repo), "bench.py") as tree:
        assert (tree / "op.py").read_text() == SLOW
    assert not tree.exists()
