"""Checkouts of recorded commits beside the working tree, for own code measured against them.

The gate times (and compares the outputs of) the frozen commit against the working tree; a round also
times the best kept round's commit. Each is a temporary, detached ``git worktree`` that the frozen
workload file is copied into (the file is frozen, so every side runs the same one), removed again however
the caller ends.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ascendopt.errors import EnvironmentProblem
from ascendopt.process import git


def frozen_commit(contract) -> str:
    """The contract's git commit; EnvironmentProblem (exit 5) when it was frozen outside git."""
    commit = contract.git.get("commit")
    if not commit:
        raise EnvironmentProblem("contract.yaml: git.commit: none recorded (frozen outside a git repository); "
                                 "own code is measured against the frozen commit in a git worktree",
                                 hint="freeze inside a git repository, or run `ascendopt gate --skip-perf`")
    return str(commit)


@contextmanager
def checkout(root: Path, commit: str, exec_rel: str, *, label: str = "baseline") -> Iterator[Path]:
    """A detached worktree of ``commit`` (root of the repository ``root``) holding the working tree's copy
    of the frozen workload file ``exec_rel``; removed (and pruned) on exit."""
    tmp = Path(tempfile.mkdtemp(prefix=f"ascendopt-{label}-"))
    tree = tmp / "tree"
    try:
        git("worktree", "add", "--detach", str(tree), commit, cwd=root, check=True)
        (tree / exec_rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / exec_rel, tree / exec_rel)
        yield tree
    finally:
        git("worktree", "remove", "--force", str(tree), cwd=root)
        shutil.rmtree(tmp, ignore_errors=True)
        git("worktree", "prune", cwd=root)
