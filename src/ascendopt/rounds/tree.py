"""Own code's working tree as a round sees it: a content digest, and the paths not yet committed.

An own-code round measures whatever the working tree holds. Two facts about that tree feed the
round's warnings (``rounds.run.record_round``): its digest, to notice a round that measures the same
code as an earlier round of the ledger (nothing edited since), and the paths that differ from HEAD,
to notice a ``keep`` that exists only as uncommitted edits (the next rounds build on the best, and a
checkout of the best needs a commit).

The digest is a sha256 over the path and contents of every tracked and every untracked, not ignored
file (``git ls-files --cached --others --exclude-standard``), read from disk. It depends on the
content only, not on HEAD: committing a kept change does not make the same code look new, and nothing
is written into the repository (no temporary index, no stash objects). The workspace folder and
``__pycache__`` folders are left out: they change with every command, the code does not.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ascendopt import process
from ascendopt.rounds.records import RoundRecord

_SHOWN_PATHS = 3  # paths named in a warning line; the rest are counted
# Commits after a kept round's own that may hold its state (committed after the round, as the
# uncommitted-keep warning asks); each candidate costs one worktree checkout to verify.
MAX_LATER_COMMITS = 5


@dataclass(frozen=True)
class TreeState:
    """``commit``: HEAD (None outside git); ``digest``: the working tree's content digest (None
    outside git); ``uncommitted``: paths that differ from HEAD (modified, added, deleted or untracked)."""

    commit: str | None
    digest: str | None
    uncommitted: tuple[str, ...] = ()


def _skipped(path: str, prefixes: Sequence[str]) -> bool:
    return "__pycache__" in path.split("/") or any(path == p or path.startswith(p + "/") for p in prefixes)


def _prefixes(root: Path, exclude: Sequence[Path]) -> list[str]:
    """``exclude`` folders inside ``root`` as repository-relative paths (others cannot be listed anyway)."""
    out = []
    for folder in exclude:
        try:
            out.append(Path(folder).resolve().relative_to(root.resolve()).as_posix())
        except ValueError:
            continue
    return [p for p in out if p not in ("", ".")]


def _file_hash(path: Path) -> str | None:
    """sha256 of the file's contents; None for a deleted file (absent from the tree, as once committed)."""
    if path.is_symlink():
        return "link:" + os.readlink(path)
    if path.is_dir():  # a submodule: its own commits are not this tree's content
        return "dir"
    if not path.exists():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _git_raw(root: Path, *args: str) -> str | None:
    """``git args`` stdout as is (``process.git`` strips it, which would cut a NUL-separated list's
    first entry); None when git fails."""
    try:
        proc = process.run(["git", *args], label=f"git {args[0]}", timeout=process.GIT_TIMEOUT_S, cwd=root)
    except (OSError, process.ProcessTimeout):
        return None
    return proc.stdout if proc.returncode == 0 else None


def tree_state(root: Path, exclude: Sequence[Path] = ()) -> TreeState:
    """The working tree of the git repository at ``root``; ``exclude``: folders to leave out (the
    workspace). Outside git (or without git) every field is empty."""
    root = Path(root)
    commit = process.git("rev-parse", "HEAD", cwd=root)
    listing = _git_raw(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if not commit or listing is None:
        return TreeState(None, None)
    prefixes = _prefixes(root, exclude)
    digest = hashlib.sha256()
    for rel in sorted({p for p in listing.split("\0") if p and not _skipped(p, prefixes)}):
        content = _file_hash(root / rel)
        if content is not None:
            digest.update(f"{rel}\0{content}\0".encode())
    # --no-optional-locks: reading the status must not rewrite the repository's index
    status = _git_raw(root, "--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all")
    entries = (status or "").split("\0")
    changed, i = [], 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        if entry[0] in "RC":  # a rename or copy: the next entry is the source path
            i += 1
        if not _skipped(entry[3:], prefixes):
            changed.append(entry[3:])
    return TreeState(commit, digest.hexdigest(), tuple(sorted(changed)))


def _paths_text(paths: Sequence[str]) -> str:
    more = len(paths) - _SHOWN_PATHS
    return ", ".join(paths[:_SHOWN_PATHS]) + (f" and {more} more" if more > 0 else "")


def same_tree_note(state: TreeState, records: Sequence[RoundRecord]) -> str | None:
    """The warning when the working tree is the one an earlier round of this ledger measured (the
    latest such round), else None."""
    if not state.digest:
        return None
    for r in reversed(records):
        if (r.change or {}).get("tree_digest") == state.digest:
            last = "the last round, " if r is records[-1] else ""
            return (f"the working tree is unchanged since round {r.number} ({last}{r.verdict}; tree digest "
                    f"{state.digest[:12]}): this round measures the same code again; make the round's one "
                    "change first")
    return None


def uncommitted_keep_note(state: TreeState, number: int) -> str | None:
    """The warning when round ``number`` is a keep whose tree differs from HEAD, else None."""
    if not state.commit or not state.uncommitted:
        return None
    differ = "differs" if len(state.uncommitted) == 1 else "differ"
    return (f"round {number} is a keep on uncommitted changes ({_paths_text(state.uncommitted)} {differ} from HEAD "
            f"{state.commit[:10]}): commit the kept state now (git add, git commit) so the next rounds, and a "
            "checkout of the best round, start from it")


@dataclass(frozen=True)
class BestTree:
    """The best kept round's state as a source tree: ``commit`` checked out at ``tree``; both None when
    no commit verifiably holds it, and ``note`` then says why (the round times against the baseline only)."""

    round: int
    commit: str | None
    tree: Path | None
    note: str | None = None


def _candidate_commits(root: Path, change: dict) -> list[str]:
    """The round's own commit (unless its tree was recorded as uncommitted), then the first commits after it
    on the way to HEAD, oldest first."""
    commit = change.get("commit")
    if not commit:
        return []
    later = process.git("rev-list", "--reverse", "--ancestry-path", f"{commit}..HEAD", cwd=root) or ""
    return ([] if change.get("committed") is False else [commit]) + later.split()[:MAX_LATER_COMMITS]


@contextmanager
def best_checkout(root: Path, record: RoundRecord, exec_rel: str, workspace: Path) -> Iterator[BestTree]:
    """The best kept round's state checked out in a temporary worktree (``gate.worktrees.checkout``, with
    the frozen workload file), removed on exit.

    The state is the round's ``change.commit`` when the round recorded its tree as committed, else one
    of the ``MAX_LATER_COMMITS`` commits after it up to HEAD; a commit counts only if its checkout's
    content digest (``tree_state``, the workspace left out) equals the round's ``tree_digest``. When none
    does (never committed, or the record has no digest or commit), ``BestTree.tree`` is None and ``note``
    names the round and what is missing: the best cannot be timed, and a round must not keep on that."""
    from ascendopt.gate.worktrees import checkout

    change = record.change or {}
    digest = change.get("tree_digest")
    inside = _prefixes(root, [workspace])  # the workspace's path in the repository: left out as at the round
    tried = _candidate_commits(root, change) if digest else []
    for commit in tried:
        with checkout(root, commit, exec_rel, label="best") as tree:
            if tree_state(tree, exclude=[tree / p for p in inside]).digest == digest:
                yield BestTree(record.number, commit, tree)
                return
    if not digest:
        why = "its record has no tree digest to verify a commit against"
    elif not change.get("commit"):
        why = "it was measured outside git"
    elif tried:
        why = (f"its kept state (tree digest {digest[:12]}) is in none of the commits checked "
               f"({', '.join(c[:10] for c in tried)})")
    else:
        why = (f"its kept state (tree digest {digest[:12]}) was never committed (measured on uncommitted changes "
               f"to {change['commit'][:10]}, and no commit follows it)")
    yield BestTree(record.number, None, None,
                   f"best not reproducible: round {record.number}: {why}; timing vs baseline only, and nothing is "
                   f"kept on a comparison with a best that was not measured (commit round {record.number}'s state, "
                   "or `ascendopt freeze --force` to start a new ledger from the working tree)")
