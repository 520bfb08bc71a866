"""Own code's working tree as a round sees it: a snapshot commit, its content digest, and the best kept
round checked out from its snapshot.

Each own-code round stores the working tree it measures as a commit on a private ref
(``refs/ascendopt/rounds/NNNN``, ``vcs.snapshot``): the user's branch, index and working tree are not
touched. The round records the snapshot (``change.snapshot``), its content digest (``change.tree_digest``:
read from disk, the workspace and ``__pycache__`` left out) and the user's HEAD it started on
(``change.commit``). A later round times the best kept round from its snapshot, so a keep never needs a
commit by the user; the snapshot's files are verified against the recorded digest.

The digest also notices a round that measures the same code as an earlier round of the ledger (nothing
edited since). It depends on the content only, not on HEAD: committing a kept change does not make the
same code look new.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ascendopt import vcs
from ascendopt.errors import IntegrityError
from ascendopt.rounds.records import RoundRecord

# Commits after a kept round's own that may hold its state, for a record of an older ascendopt (no
# snapshot: its state was found in a commit made after the round); each candidate is read and verified.
MAX_LATER_COMMITS = 5


@dataclass(frozen=True)
class TreeState:
    """``commit``: HEAD (None outside git); ``digest``: the working tree's content digest (None outside
    git); ``uncommitted``: paths whose content differs from HEAD's (edited, added, deleted), read from disk;
    ``snapshot``: the round's snapshot of it (None when none was taken)."""

    commit: str | None
    digest: str | None
    uncommitted: tuple[str, ...] = ()
    snapshot: vcs.Snapshot | None = None


def tree_state(root: Path, exclude: Sequence[Path] = ()) -> TreeState:
    """The working tree of the git repository at ``root``, read from disk; ``exclude``: folders to leave out
    (the workspace). Outside git (or before the first commit) every field is empty."""
    root = Path(root)
    commit = vcs.head(root)
    tokens = vcs.working_tokens(root, exclude) if commit else None
    if not commit or tokens is None:
        return TreeState(None, None)
    prefixes = vcs.relative_prefixes(root, exclude)
    committed = {p: f.token for p, f in vcs.tree_files(root, commit, "HEAD").items() if not vcs.skipped(p, prefixes)}
    changed = tuple(sorted(p for p in {*tokens, *committed} if tokens.get(p) != committed.get(p)))
    return TreeState(commit, vcs.content_digest(tokens), changed)


def round_snapshot(root: Path, workspace: Path, number: int) -> TreeState:
    """Store the working tree as round ``number``'s snapshot (``vcs.snapshot`` on
    ``refs/ascendopt/rounds/NNNN``); outside git (or before the first commit) an empty TreeState."""
    root = Path(root)
    commit = vcs.head(root)
    if not commit:
        return TreeState(None, None)
    ref = vcs.private_ref(root, workspace, "rounds", f"{number:04d}")
    snap = vcs.snapshot(root, ref, f"ascendopt round {number}: the working tree measured", exclude=[workspace])
    return TreeState(commit, snap.digest, snapshot=snap)


def change_record(root: Path, state: TreeState, workspace: Path) -> dict:
    """A code round's ``change``: the user's HEAD, the snapshot commit and tree, the content digest, the
    diff stat of HEAD to the snapshot, and whether HEAD holds the snapshot's files (``committed``)."""
    snap = state.snapshot
    change = {"kind": "code", "commit": state.commit, "snapshot": snap.commit if snap else None,
              "tree": snap.tree if snap else None, "tree_digest": state.digest,
              "diff_stat": vcs.diff_stat(root, state.commit, snap.commit)[-2000:] if snap else "",
              "committed": None}
    if snap and state.commit:
        change["committed"] = vcs.user_commit_holding(root, snap.commit, [workspace], depth=1) is not None
    return change


def same_tree_note(state: TreeState, records: Sequence[RoundRecord], accepting: bool = False) -> str | None:
    """The warning when the working tree is the one an earlier round of this ledger measured (the
    latest such round), else None. ``accepting``: this round gives ``--accept-implausible``; measuring the
    tree of a round reverted only because its implausible result was not accepted is then the point (the
    acceptance the ``next:`` line suggests, issue 41), not a round without its change: no warning."""
    if not state.digest:
        return None
    for r in reversed(records):
        if (r.change or {}).get("tree_digest") == state.digest:
            if accepting and awaits_acceptance(r):
                return None
            last = "the last round, " if r is records[-1] else ""
            return (f"the working tree is unchanged since round {r.number} ({last}{r.verdict}; tree digest "
                    f"{state.digest[:12]}): this round measures the same code again; make the round's one "
                    "change first")
    return None


def awaits_acceptance(record: RoundRecord) -> bool:
    """A round reverted on an implausible speedup nobody accepted: its measured state can be accepted by
    measuring it again with ``--accept-implausible REASON`` (no new change)."""
    found = (record.timing or {}).get("implausible")
    return record.verdict == "revert" and bool(found) and not found.get("accepted")


def accepted_by(root: Path | None = None) -> dict:
    """Who accepts an implausible result, and when: ``{"by", "at"}``. ``by``: git's ``user.name
    <user.email>`` as the user's own git sees it in ``root`` (the name a reviewer knows from the commits;
    the judge's git reads no global configuration, so it is asked with the user's environment: a label, not
    evidence), else the login name; ``at``: UTC, ISO 8601."""
    import datetime as _dt
    import getpass

    from ascendopt import process

    def config(key: str) -> str | None:
        try:
            proc = process.run(["git", "config", "--get", key], label=f"git config {key}", timeout=10,
                               cwd=root or Path.cwd())
        except (OSError, process.ProcessTimeout):  # no git: the login name below
            return None
        return proc.stdout.strip() or None if proc.returncode == 0 else None

    name, email = config("user.name"), config("user.email")
    if name or email:
        who = f"{name} <{email}>" if name and email else str(name or email)
    else:
        try:
            who = getpass.getuser()
        except (KeyError, OSError):  # no login name (a container without a passwd entry)
            who = "unknown"
    return {"by": who, "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def best_commits(root: Path, record: RoundRecord, workspace: Path) -> dict:
    """``{"snapshot", "user_commit"}`` of a kept code round: its snapshot commit and the newest user's
    commit (of the last few from HEAD) holding the same files, None where there is none."""
    change = record.change or {}
    snap = change.get("snapshot")
    user = vcs.user_commit_holding(Path(root), snap, [workspace]) if snap else None
    return {"snapshot": snap, "user_commit": user}


@dataclass(frozen=True)
class BestTree:
    """The best kept round's state as a source tree: ``commit`` (its snapshot) checked out at ``tree``; both
    None when no commit verifiably holds it, and ``note`` then says why (the round times against the
    baseline only)."""

    round: int
    commit: str | None
    tree: Path | None
    note: str | None = None


def _legacy_candidates(root: Path, change: dict) -> list[str]:
    """A record without a snapshot: its own commit (unless recorded as uncommitted), then the first commits
    after it on the way to HEAD, oldest first."""
    from ascendopt import process

    commit = change.get("commit")
    if not commit:
        return []
    later = process.git("rev-list", "--reverse", "--ancestry-path", f"{commit}..HEAD", cwd=root) or ""
    return ([] if change.get("committed") is False else [commit]) + later.split()[:MAX_LATER_COMMITS]


@contextmanager
def best_checkout(root: Path, record: RoundRecord, exec_rel: str, workspace: Path) -> Iterator[BestTree]:
    """The best kept round's state in a verified folder (``judge.worktrees.checkout``, with the frozen
    workload file), removed on exit.

    The state is the round's snapshot commit, whose files must have the round's ``tree_digest``
    (IntegrityError, exit 3, when they do not: the record or the objects were altered). A snapshot that
    is no longer in the repository (its ref deleted and pruned), or a record of an older ascendopt
    without one whose state no later commit holds, gives ``BestTree.tree`` None and a ``note`` naming
    the round and what is missing: the best cannot be timed, and a round must not keep on that."""
    from ascendopt.judge.worktrees import checkout

    root = Path(root)
    change = record.change or {}
    digest = change.get("tree_digest")
    snap = change.get("snapshot")
    if snap and digest and vcs.commit_tree_id(root, snap) is not None:
        with checkout(root, snap, exec_rel, label="best", digest=digest) as tree:
            yield BestTree(record.number, snap, tree)
        return
    prefixes = vcs.relative_prefixes(root, [workspace])
    tried = [] if snap or not digest else _legacy_candidates(root, change)
    for commit in tried:
        try:
            files = vcs.tree_files(root, commit, "best commit")
        except IntegrityError:
            continue
        tokens = {p: f.token for p, f in files.items() if not vcs.skipped(p, prefixes)}
        if vcs.content_digest(tokens) == digest:
            with checkout(root, commit, exec_rel, label="best") as tree:
                yield BestTree(record.number, commit, tree)
            return
    if not digest:
        why = "its record has no tree digest to verify a commit against"
    elif snap:
        why = f"its snapshot {snap[:10]} is no longer in the repository (its ref deleted and pruned)"
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
                   f"kept on a comparison with a best that was not measured (`ascendopt freeze --force` starts a "
                   "new ledger from the working tree)")
