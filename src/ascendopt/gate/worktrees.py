"""Trees of recorded commits beside the working tree, for own code measured against them.

The gate times (and compares the outputs of) the frozen commit against the working tree; a round also
times the best kept round's snapshot. Each is a temporary folder holding the commit's files as stored
(``ascendopt.vcs``: every object verified against its id, no checkout, so no hook, filter or eol
conversion runs), plus the working tree's copy of the frozen workload file (the file is frozen, so every
side runs the same one); removed again however the caller ends.

The frozen commit is checked before use (``frozen_commit``): it must still be in the repository (a
shallow clone that lacks it is exit 5 with the fetch hint), reachable from the user's history, and hold
the tree and the content digest recorded at freeze (exit 3 otherwise).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ascendopt import vcs
from ascendopt.errors import EnvironmentProblem, IntegrityError


def frozen_commit(contract, root: Path | None = None) -> str:
    """The contract's git commit, verified (``vcs.verify_recorded`` against the contract's ``git.tree`` and
    ``git.tree_digest`` where recorded) in the repository at ``root`` (default: the project root);
    EnvironmentProblem (exit 5) when it was frozen outside git."""
    commit = contract.git.get("commit")
    if not commit:
        raise EnvironmentProblem("contract.yaml: git.commit: none recorded (frozen outside a git repository); "
                                 "own code is measured against the frozen commit",
                                 hint="freeze inside a git repository, or run `ascendopt gate --skip-perf`")
    if root is None:
        from ascendopt.contract.frozen import project_root

        root = project_root()
    vcs.verify_recorded(Path(root), str(commit), tree=contract.git.get("tree"),
                        digest=contract.git.get("tree_digest"), what="frozen commit")
    return str(commit)


def frozen_commit_checks(contract, root: Path) -> list:
    """The integrity stage's check of an own-code contract's frozen commit (``frozen_commit``): one passed
    or failed ``Check``; none for a bundled kernel or a contract frozen outside git. A shallow clone that
    lacks the commit raises EnvironmentProblem (exit 5): nothing was tampered with, the history is missing."""
    from ascendopt.gate.result import Check

    commit = contract.git.get("commit")
    if contract.is_kernel or not commit:
        return []
    try:
        frozen_commit(contract, root)
    except IntegrityError as exc:
        return [Check(f"frozen commit {str(commit)[:12]}", False, str(exc))]
    return [Check(f"frozen commit {str(commit)[:12]}", True, "reachable, holding the content recorded at freeze")]


@contextmanager
def checkout(root: Path, commit: str, exec_rel: str, *, label: str = "baseline",
             digest: str | None = None) -> Iterator[Path]:
    """A temporary folder holding the files of ``commit`` (in the repository ``root``) as stored, with the
    working tree's copy of the frozen workload file ``exec_rel``; removed on exit. ``digest``: the content
    digest the commit must have (IntegrityError, exit 3, otherwise)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"ascendopt-{label}-"))
    tree = tmp / "tree"
    try:
        files = vcs.tree_files(Path(root), commit, f"{label} commit")
        if digest and vcs.content_digest({p: f.token for p, f in files.items()}) != digest:
            raise IntegrityError(f"{label} commit {commit[:12]}: its files are not the content recorded for it "
                                 f"(digest {digest[:12]})")
        tree.mkdir()
        vcs.write_tree(files, tree)
        (tree / exec_rel).parent.mkdir(parents=True, exist_ok=True)
        if (tree / exec_rel).is_symlink():
            (tree / exec_rel).unlink()
        shutil.copyfile(root / exec_rel, tree / exec_rel)
        yield tree
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
