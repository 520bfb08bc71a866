"""Trees of recorded commits beside the working tree, for own code measured against them.

The gate times (and compares the outputs of) the frozen commit against the working tree; a round also
times the best kept round's snapshot. Each is a folder holding the commit's files as stored
(``ascendopt.vcs``: every object verified against its id, no checkout, so no hook, filter or eol
conversion runs), plus the working tree's copy of the frozen workload file (the file is frozen, so every
side runs the same one).

The folder is reused across commands (``<cache>/trees/<commit id>``, ``device.ascend_env.cache_dir``;
a commit id names its content, so clones of one repository share it) only when its content verifies:
before each use, under an exclusive lock, every file must be the commit's file byte for byte and mode for
mode, and nothing else may be there; bytecode caches (``__pycache__``) are deleted, never trusted (a
planted ``.pyc`` whose source stamp matches would run instead of the verified source). A folder that does
not verify is written again. Where the cache cannot be written, or another command holds the folder, a
temporary folder is used and removed afterwards. At most ``MAX_CACHED_TREES`` folders are kept (the least
recently used go first).

The frozen commit is checked before use (``frozen_commit``): it must still be in the repository (a
shallow clone that lacks it is exit 5 with the fetch hint), reachable from the user's history, and hold
the tree and the content digest recorded at freeze (exit 3 otherwise).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
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
    from ascendopt.judge.result import Check

    commit = contract.git.get("commit")
    if contract.is_kernel or not commit:
        return []
    try:
        frozen_commit(contract, root)
    except IntegrityError as exc:
        return [Check(f"frozen commit {str(commit)[:12]}", False, str(exc))]
    return [Check(f"frozen commit {str(commit)[:12]}", True, "reachable, holding the content recorded at freeze")]


MAX_CACHED_TREES = 8  # reusable commit folders kept in the cache (each a copy of a tracked tree)


@contextmanager
def checkout(root: Path, commit: str, exec_rel: str, *, label: str = "baseline",
             digest: str | None = None) -> Iterator[Path]:
    """A folder holding the files of ``commit`` (in the repository ``root``) as stored, with the working
    tree's copy of the frozen workload file ``exec_rel``: the cached folder of the commit when it verifies
    (rewritten when not), else a temporary one removed on exit. ``digest``: the content digest the commit
    must have (IntegrityError, exit 3, otherwise)."""
    files = vcs.tree_files(Path(root), commit, f"{label} commit")
    if digest and vcs.content_digest({p: f.token for p, f in files.items()}) != digest:
        raise IntegrityError(f"{label} commit {commit[:12]}: its files are not the content recorded for it "
                             f"(digest {digest[:12]})")
    with _cached(commit, files, exec_rel) as cached:
        if cached is not None:
            _place_workload(root, cached, exec_rel)
            with _handed_out(cached, files, exec_rel):
                yield cached
            return
    tmp = Path(tempfile.mkdtemp(prefix=f"ascendopt-{label}-"))
    tree = tmp / "tree"
    try:
        tree.mkdir()
        vcs.write_tree(files, tree)
        _place_workload(root, tree, exec_rel)
        with _handed_out(tree, files, exec_rel):
            yield tree
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _place_workload(root: Path, tree: Path, exec_rel: str) -> None:
    """The working tree's copy of the frozen workload file into ``tree``."""
    (tree / exec_rel).parent.mkdir(parents=True, exist_ok=True)
    if (tree / exec_rel).is_symlink():
        (tree / exec_rel).unlink()
    shutil.copyfile(root / exec_rel, tree / exec_rel)


@contextmanager
def _cached(commit: str, files: Mapping[str, vcs.TreeFile], exec_rel: str) -> Iterator[Path | None]:
    """The cached folder of ``commit``, verified (``_difference``) or written again, held under an exclusive
    lock until exit; None (use a temporary folder) when the cache cannot be written or is in use."""
    import fcntl

    from ascendopt.device.ascend_env import cache_dir

    cache = cache_dir() / "trees"
    tree = cache / commit
    try:
        cache.mkdir(parents=True, exist_ok=True)
        lock = open(cache / f"{commit}.lock", "a+")  # noqa: SIM115 - held open for the folder's use
    except OSError:
        yield None
        return
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another command uses this folder now
            yield None
            return
        try:
            if _difference(tree, files, exec_rel) is not None:
                shutil.rmtree(tree, ignore_errors=True)
                tree.mkdir()
                vcs.write_tree(files, tree)
            os.utime(lock.name)  # the folder's last use, for pruning
            _prune(cache, keep=commit)
        except OSError:
            shutil.rmtree(tree, ignore_errors=True)
            yield None
            return
        yield tree


def _difference(tree: Path, files: Mapping[str, vcs.TreeFile], exec_rel: str) -> str | None:
    """None when the folder ``tree`` holds exactly ``files`` (bytes, executable bit, link targets, submodule
    folders) besides the workload file ``exec_rel``; else the first difference, in words. Its ``__pycache__``
    folders are deleted first."""
    if not tree.is_dir() or tree.is_symlink():
        return "the folder is missing"
    seen: set[str] = set()
    # the folders the files need: any other folder, empty or not, was added
    folders = {parent.as_posix() for rel in [*files, exec_rel] for parent in Path(rel).parents} - {"."}
    for folder, dirs, names in os.walk(tree):
        rel_dir = Path(folder).relative_to(tree).as_posix()
        for name in list(dirs):
            path = Path(folder) / name
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if name == "__pycache__" and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
                dirs.remove(name)
            elif path.is_symlink() or (rel in files and files[rel].mode == "160000"):
                dirs.remove(name)  # a link or a submodule's folder is checked as an entry of its own
                names.append(name)
            elif rel not in folders:
                return f"{rel}/ was added"
        for name in names:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            seen.add(rel)
            if rel == exec_rel:
                continue
            item = files.get(rel)
            if item is None:
                return f"{rel} was added"
            if not _same(Path(folder) / name, item):
                return f"{rel} is not the commit's"
    missing = sorted(set(files) - seen)
    return f"{missing[0]} is missing" if missing else None


# The folders ``checkout`` has handed out and not yet taken back: real path -> (the commit's files, the workload
# file's path in it, its bytes), so that ``changed`` can verify a folder again while it is in use.
_HANDED_OUT: dict[str, tuple[Mapping[str, vcs.TreeFile], str, bytes]] = {}


@contextmanager
def _handed_out(tree: Path, files: Mapping[str, vcs.TreeFile], exec_rel: str) -> Iterator[Path]:
    key = os.path.realpath(tree)
    _HANDED_OUT[key] = (files, exec_rel, (tree / exec_rel).read_bytes())
    try:
        yield tree
    finally:
        _HANDED_OUT.pop(key, None)


def changed(tree: Path) -> str | None:
    """Verify a folder ``checkout`` handed out again, while it is in use (after code under test has run beside
    it): None when it still holds exactly the commit's files and the workload file it was given; else what
    changed. A folder ``checkout`` did not hand out: None."""
    entry = _HANDED_OUT.get(os.path.realpath(tree))
    if entry is None:
        return None
    files, exec_rel, workload = entry
    found = _difference(tree, files, exec_rel)
    if found is None:
        path = tree / exec_rel
        if path.is_symlink() or not path.is_file() or path.read_bytes() != workload:
            found = f"{exec_rel} is not the workload file it was given"
    return found


def source_digests(tree: Path) -> dict[str, str]:
    """For a folder ``checkout`` handed out: the real path of each of its files -> the sha256 of the bytes it must
    hold (what a worker of that folder must have compiled); empty for any other folder."""
    import hashlib

    entry = _HANDED_OUT.get(os.path.realpath(tree))
    if entry is None:
        return {}
    files, exec_rel, workload = entry
    base = os.path.realpath(tree)
    digests = {os.path.join(base, rel): hashlib.sha256(item.data or b"").hexdigest()
               for rel, item in files.items() if item.mode in ("100644", "100755")}
    digests[os.path.join(base, exec_rel)] = hashlib.sha256(workload).hexdigest()
    return digests


def _same(path: Path, item: vcs.TreeFile) -> bool:
    """Whether ``path`` is the recorded file ``item`` (not following links)."""
    info = path.lstat()
    if item.mode == "120000":
        return stat.S_ISLNK(info.st_mode) and os.readlink(path) == (item.data or b"").decode("utf-8",
                                                                                             "surrogateescape")
    if item.mode == "160000":
        return stat.S_ISDIR(info.st_mode) and not any(path.iterdir())
    if not stat.S_ISREG(info.st_mode) or bool(info.st_mode & stat.S_IXUSR) != (item.mode == "100755"):
        return False
    return info.st_size == len(item.data or b"") and path.read_bytes() == (item.data or b"")


def _prune(cache: Path, keep: str) -> None:
    """Remove the least recently used cached folders beyond ``MAX_CACHED_TREES`` (never ``keep``, never one
    another command holds)."""
    import fcntl

    locks = sorted(cache.glob("*.lock"), key=lambda p: p.stat().st_mtime, reverse=True)
    for lock_path in locks[MAX_CACHED_TREES:]:
        commit = lock_path.name.removesuffix(".lock")
        if commit == keep:
            continue
        with open(lock_path, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue
            shutil.rmtree(cache / commit, ignore_errors=True)
            with contextlib.suppress(OSError):
                lock_path.unlink()
