"""The judge's view of git trees: recorded commits read raw and verified, working trees hashed from disk,
round snapshots stored on private refs.

Every git command goes through ``process.git_run`` (the judge's git: no hooks, replace refs, grafts,
filters, user or system configuration, GIT_* environment). On top of that nothing here trusts git's
view of a tree:

- A recorded commit (the frozen commit, a round's snapshot) is read object by object with
  ``cat-file --batch`` and every object (commit, trees, blobs) is hashed here and compared with its id, so
  an altered object database, a replace ref or a graft cannot show other content under the recorded id.
  Its files are written raw (no smudge filter, no eol conversion, no checkout hook), and the tree's
  content digest is compared with the one recorded at freeze or at the round.
- A working tree's content is read from disk and hashed here: index bits (assume-unchanged,
  skip-worktree), fsmonitor and the untracked cache are never asked whether a file changed. git only
  lists the paths (``ls-files --cached --others --exclude-standard``: tracked files and untracked files
  that are not ignored).

The *content digest* of a tree is a sha256 over ``path NUL token NUL`` of its files in path order, the
token being the sha256 of a file's bytes, ``link:<target>`` for a symbolic link, ``dir`` for a submodule.
The workspace folder and ``__pycache__`` folders are left out of a working tree (they change with every
command; the code does not).

A round's *snapshot* is a commit of the working tree as the round measured it (tree built in a temporary
index, parent: the user's HEAD), kept on ``refs/ascendopt/rounds/NNNN``: the user's branch, index and
working tree are not touched, and the best round can be checked out from it whether or not the user
committed it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ascendopt import process
from ascendopt.errors import EnvironmentProblem, IntegrityError

REF_PREFIX = "refs/ascendopt"
DEFAULT_WORKSPACE = ".ascendopt"  # a workspace at the repository's top level under this name owns REF_PREFIX itself
# The identity of snapshot commits (never the user's: the user did not make them)
_IDENTITY = {"GIT_AUTHOR_NAME": "ascendopt", "GIT_AUTHOR_EMAIL": "ascendopt@localhost",
             "GIT_COMMITTER_NAME": "ascendopt", "GIT_COMMITTER_EMAIL": "ascendopt@localhost"}
FETCH_HINT = "a shallow clone lacks it: fetch the full history (`git fetch --unshallow`; CI: fetch-depth: 0)"
_USER_COMMITS_SEARCHED = 20  # commits from HEAD searched for one that holds a snapshot's tree


def _run(root: Path, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None,
         binary: bool = False):
    """The judge's git in ``root``; no git or a hung git is an environment problem (exit 5)."""
    try:
        return process.git_run(*args, cwd=root, input=input, env=env, binary=binary)
    except (OSError, process.ProcessTimeout) as exc:
        raise EnvironmentProblem(f"git {' '.join(args[:2])} in {root}: {exc}") from None


def _out(root: Path, *args: str, **kw) -> str | None:
    """stdout of ``git args`` (text, stripped), None when git fails."""
    proc = _run(root, *args, **kw)
    if proc.returncode != 0:
        return None
    out = proc.stdout
    return (out.decode() if isinstance(out, bytes) else out).strip()


def _must(root: Path, *args: str, **kw) -> str:
    proc = _run(root, *args, **kw)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace") if isinstance(proc.stderr, bytes) else proc.stderr
        last = (err.strip().splitlines() or ["no message"])[-1]
        raise EnvironmentProblem(f"git {' '.join(args[:2])} failed in {root}: {last}")
    out = proc.stdout
    return (out.decode() if isinstance(out, bytes) else out).strip()


def head(root: Path) -> str | None:
    """The commit HEAD names in the repository at ``root``; None outside git or before the first commit."""
    return _out(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")


def toplevel(start: Path) -> Path | None:
    """The top level of the git working tree containing ``start``: the nearest folder from ``start`` up that
    holds ``.git`` and that git accepts as a repository; None outside git. Found here rather than asked of
    git, whose answer a repository's ``core.worktree`` can point anywhere."""
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder if _out(folder, "rev-parse", "--git-dir") is not None else None
    return None


def _algorithm(root: Path) -> str:
    return _out(root, "rev-parse", "--show-object-format") or "sha1"


def _object_id(algorithm: str, kind: str, data: bytes) -> str:
    return hashlib.new(algorithm, f"{kind} {len(data)}\0".encode() + data).hexdigest()


def read_objects(root: Path, oids: Sequence[str]) -> dict[str, tuple[str, bytes]]:
    """``{oid: (type, bytes)}`` of the objects in the repository at ``root`` (one ``cat-file --batch``);
    a missing object is absent from the result. The bytes are as stored, not verified here."""
    if not oids:
        return {}
    proc = _run(root, "cat-file", "--batch", input=("\n".join(oids) + "\n").encode())
    if proc.returncode != 0:
        raise EnvironmentProblem(f"git cat-file failed in {root}: {proc.stderr.decode(errors='replace').strip()}")
    out, pos, found = proc.stdout, 0, {}
    for _ in oids:
        end = out.index(b"\n", pos)
        header = out[pos:end].decode().split()
        pos = end + 1
        if len(header) != 3:  # "<oid> missing" / "<oid> ambiguous"
            continue
        oid, kind, size = header[0], header[1], int(header[2])
        found[oid] = (kind, out[pos:pos + size])
        pos += size + 1
    return found


def _verified(root: Path, algorithm: str, wanted: Mapping[str, str], what: str) -> dict[str, tuple[str, bytes]]:
    """The objects ``wanted`` (``{oid: path it stands for}``), each hashed and compared with its id; a
    missing object or one whose bytes are not its id's is an integrity failure (exit 3) naming the path."""
    objects = read_objects(root, list(wanted))
    for oid, path in wanted.items():
        if oid not in objects:
            raise IntegrityError(f"{what}: git object {oid} ({path}) is missing from the repository at {root}")
        kind, data = objects[oid]
        if _object_id(algorithm, kind, data) != oid:
            raise IntegrityError(f"{what}: git object {oid} ({path}) does not hold the content its id names: "
                                 "the object database was altered")
    return objects


def _tree_entries(data: bytes, width: int) -> list[tuple[str, str, str]]:
    """``(mode, name, oid)`` of a raw tree object (``mode SP name NUL raw-id`` repeated)."""
    entries, pos = [], 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        raw = data[nul + 1:nul + 1 + width]
        entries.append((data[pos:space].decode(), data[space + 1:nul].decode("utf-8", "surrogateescape"), raw.hex()))
        pos = nul + 1 + width
    return entries


@dataclass(frozen=True)
class TreeFile:
    """One file of a recorded tree: git ``mode`` (``100644``, ``100755``, ``120000`` link, ``160000``
    submodule) and its bytes (a link's target; None for a submodule)."""

    mode: str
    data: bytes | None

    @property
    def token(self) -> str:
        if self.mode == "160000":
            return "dir"
        if self.mode == "120000":
            return "link:" + (self.data or b"").decode("utf-8", "surrogateescape")
        return hashlib.sha256(self.data or b"").hexdigest()


def commit_tree_id(root: Path, commit: str) -> str | None:
    """The tree id the commit object ``commit`` names (verified against the commit's id); None when the
    repository does not hold the commit."""
    algorithm = _algorithm(root)
    objects = read_objects(root, [commit])
    if commit not in objects or objects[commit][0] != "commit":
        return None
    kind, data = objects[commit]
    if _object_id(algorithm, kind, data) != commit:
        raise IntegrityError(f"commit {commit}: its object does not hold the content its id names: the object "
                             "database was altered")
    first = data.split(b"\n", 1)[0].decode()
    return first.split()[1]


def tree_files(root: Path, commit: str, what: str = "commit") -> dict[str, TreeFile]:
    """Every file of ``commit`` (a full commit id) as stored: ``{path: TreeFile}``. Each object on the way
    (commit, trees, blobs) is verified against its id; a missing commit is an integrity failure."""
    tree = commit_tree_id(root, commit)
    if tree is None:
        raise IntegrityError(f"{what} {commit[:12]}: not in the repository at {root}")
    algorithm = _algorithm(root)
    width = hashlib.new(algorithm).digest_size
    files: dict[str, tuple[str, str]] = {}
    level = {tree: ""}
    while level:
        objects = _verified(root, algorithm, {oid: path or "/" for oid, path in level.items()}, what)
        following: dict[str, str] = {}
        for oid, prefix in level.items():
            for mode, name, child in _tree_entries(objects[oid][1], width):
                path = f"{prefix}/{name}" if prefix else name
                if mode == "40000":
                    following[child] = path
                else:
                    files[path] = (mode.rjust(6, "0"), child)
        level = following
    blobs = {oid: path for path, (mode, oid) in files.items() if mode != "160000"}
    objects = _verified(root, algorithm, blobs, what)
    return {path: TreeFile(mode, None if mode == "160000" else objects[oid][1])
            for path, (mode, oid) in sorted(files.items())}


def content_digest(tokens: Mapping[str, str]) -> str:
    """The content digest of a tree given ``{path: token}`` (see the module docstring)."""
    digest = hashlib.sha256()
    for path in sorted(tokens):
        digest.update(f"{path}\0{tokens[path]}\0".encode())
    return digest.hexdigest()


def write_tree(files: Mapping[str, TreeFile], dest: Path) -> None:
    """Write ``files`` under ``dest`` as stored: bytes raw, the executable bit from the mode, links as links,
    a submodule as an empty folder."""
    for path, item in files.items():
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if item.mode == "160000":
            target.mkdir(exist_ok=True)
        elif item.mode == "120000":
            os.symlink((item.data or b"").decode("utf-8", "surrogateescape"), target)
        else:
            target.write_bytes(item.data or b"")
            if item.mode == "100755":
                target.chmod(0o755)


def mismatched_paths(files: Mapping[str, TreeFile], recorded: Mapping[str, str]) -> list[str]:
    """Paths whose token differs between ``files`` and ``recorded`` ``{path: token}`` (either side missing)."""
    tokens = {p: f.token for p, f in files.items()}
    return sorted(p for p in {*tokens, *recorded} if tokens.get(p) != recorded.get(p))


# -- recorded commits ------------------------------------------------------------------------------


def is_shallow(root: Path) -> bool:
    return _out(root, "rev-parse", "--is-shallow-repository") == "true"


def _reachable(root: Path, commit: str) -> bool:
    """Whether the user's history holds ``commit``: an ancestor of HEAD, or of a branch, tag or remote
    branch (ascendopt's own refs do not count)."""
    if _run(root, "merge-base", "--is-ancestor", commit, "HEAD").returncode == 0:
        return True
    refs = _out(root, "for-each-ref", "--count=1", "--format=%(refname)", "--contains", commit,
                "refs/heads", "refs/tags", "refs/remotes")
    return bool(refs)


def verify_recorded(root: Path, commit: str, *, tree: str | None = None, digest: str | None = None,
                    what: str = "frozen commit", reachable: bool = True) -> dict[str, TreeFile]:
    """The files of ``commit`` after checking that it is still what was recorded: in the repository (a
    shallow clone that lacks it: EnvironmentProblem, exit 5, with the fetch hint; otherwise IntegrityError,
    exit 3), reachable from the user's history when ``reachable`` (a history rewrite or reset that dropped
    it: exit 3), naming the recorded ``tree`` id, and holding the recorded content ``digest`` (exit 3)."""
    if commit_tree_id(root, commit) is None:
        if is_shallow(root):
            raise EnvironmentProblem(f"{what} {commit[:12]}: not in this shallow clone of {root}", hint=FETCH_HINT)
        raise IntegrityError(f"{what} {commit[:12]}: not in the repository at {root} (history rewritten and the "
                             "commit pruned, or recorded in another repository)",
                             hint="restore the history that holds it, or re-freeze (`ascendopt freeze --force`)")
    if reachable and not _reachable(root, commit):
        if is_shallow(root):
            raise EnvironmentProblem(f"{what} {commit[:12]}: not reachable in this shallow clone of {root}",
                                     hint=FETCH_HINT)
        raise IntegrityError(f"{what} {commit[:12]}: no longer reachable from HEAD or any branch, tag or remote "
                             "branch (history rewritten or reset)",
                             hint="restore the history that holds it, or re-freeze (`ascendopt freeze --force`)")
    actual_tree = commit_tree_id(root, commit)
    if tree and actual_tree != tree:
        raise IntegrityError(f"{what} {commit[:12]}: names tree {actual_tree[:12]}, not the tree {tree[:12]} "
                             "recorded for it")
    files = tree_files(root, commit, what)
    if digest and content_digest({p: f.token for p, f in files.items()}) != digest:
        raise IntegrityError(f"{what} {commit[:12]}: its files no longer have the content digest recorded for "
                             f"it ({digest[:12]})")
    return files


# -- working trees -----------------------------------------------------------------------------------


def skipped(path: str, prefixes: Sequence[str]) -> bool:
    return "__pycache__" in path.split("/") or any(path == p or path.startswith(p + "/") for p in prefixes)


def relative_prefixes(root: Path, exclude: Sequence[Path]) -> list[str]:
    """``exclude`` folders inside ``root`` as repository-relative paths (others cannot be listed anyway)."""
    out = []
    for folder in exclude:
        try:
            out.append(Path(folder).resolve().relative_to(Path(root).resolve()).as_posix())
        except ValueError:
            continue
    return [p for p in out if p not in ("", ".")]


def file_token(path: Path) -> str | None:
    """A working-tree file's token (see the module docstring); None for a deleted file."""
    if path.is_symlink():
        return "link:" + os.readlink(path)
    if path.is_dir():
        return "dir"
    if not path.exists():
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def working_paths(root: Path, exclude: Sequence[Path] = ()) -> list[str] | None:
    """The working tree's paths: tracked and untracked-not-ignored, the ``exclude`` folders and
    ``__pycache__`` left out; None outside git."""
    proc = _run(root, f"--work-tree={root}", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if proc.returncode != 0:
        return None
    prefixes = relative_prefixes(root, exclude)
    return sorted({p for p in proc.stdout.split("\0") if p and not skipped(p, prefixes)})


def working_tokens(root: Path, exclude: Sequence[Path] = ()) -> dict[str, str] | None:
    """``{path: token}`` of the working tree read from disk (deleted files absent); None outside git."""
    paths = working_paths(root, exclude)
    if paths is None:
        return None
    tokens = {rel: file_token(root / rel) for rel in paths}
    return {rel: token for rel, token in tokens.items() if token is not None}


# What a workload can load as code from the repository (a module, a compiled extension, a start-up file)
CODE_SUFFIXES = (".py", ".so", ".pyd", ".pth")


def ignored_code(root: Path, exclude: Sequence[Path] = ()) -> dict[str, str] | None:
    """``{path: token}`` of the code files git ignores under ``root`` (``CODE_SUFFIXES``: a local module never
    committed, a compiled extension built in place), the ``exclude`` folders, ``__pycache__`` and environments
    kept inside the repository (a folder holding ``pyvenv.cfg``, whose files the environment's own checks
    cover) left out; None outside git. The working tree's digest leaves ignored files out, yet a workload can
    import them: what a recorded acceptance of a measured state must also pin (``gate.stages.
    recorded_acceptance``). A fresh clone has none, unless its build makes them."""
    proc = _run(root, f"--work-tree={root}", "ls-files", "-z", "--others", "--ignored", "--exclude-standard")
    if proc.returncode != 0:
        return None
    prefixes = relative_prefixes(root, exclude)
    paths = sorted({p for p in proc.stdout.split("\0") if p and not skipped(p, prefixes)})
    envs = {str(Path(p).parent) for p in paths if Path(p).name == "pyvenv.cfg"}
    tokens = {}
    for rel in paths:
        if not rel.endswith(CODE_SUFFIXES) or any(rel.startswith(env + "/") for env in envs):
            continue
        token = file_token(root / rel)
        if token is not None:
            tokens[rel] = token
    return tokens


def commit_state(root: Path) -> dict:
    """What freeze records of the repository at ``root``: ``{"commit": HEAD, "dirty": whether a file of
    HEAD differs on disk, "tree": HEAD's tree id, "tree_digest": HEAD's content digest}``; outside git
    (or before the first commit) ``{"commit": None, "dirty": False}``. Read from the objects and the
    disk, never from the index."""
    commit = head(root)
    if not commit:
        return {"commit": None, "dirty": False}
    files = tree_files(root, commit, "HEAD")
    dirty = any(file_token(root / p) != f.token for p, f in files.items() if f.mode != "160000")
    return {"commit": commit, "dirty": dirty, "tree": commit_tree_id(root, commit),
            "tree_digest": content_digest({p: f.token for p, f in files.items()})}


# -- snapshots ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """A working tree stored as ``commit`` (tree id ``tree``, content ``digest``) on ``ref``; ``head``: the
    user's HEAD it was taken on (its parent), None before the first commit."""

    commit: str
    tree: str
    digest: str
    head: str | None
    ref: str


def private_ref(root: Path, workspace: Path, *parts: str) -> str:
    """The private ref of a workspace: ``refs/ascendopt/<parts>`` for ``.ascendopt`` at the repository's top
    level, else ``refs/ascendopt/ws-<12 hex of its path>/<parts>`` (two workspaces never share refs)."""
    where = relative_prefixes(root, [workspace])
    name = where[0] if where else Path(workspace).resolve().as_posix()
    base = REF_PREFIX if name == DEFAULT_WORKSPACE else \
        f"{REF_PREFIX}/ws-{hashlib.sha256(name.encode()).hexdigest()[:12]}"
    return "/".join([base, *parts])


def snapshot(root: Path, ref: str, message: str, exclude: Sequence[Path] = ()) -> Snapshot:
    """Store the working tree at ``root`` (``working_paths``; contents hashed from disk, no filter or eol
    conversion) as a commit on ``ref``. The tree is built in a temporary index; the user's index, branch
    and working tree are untouched. Raises EnvironmentProblem outside git."""
    paths = working_paths(root, exclude)
    if paths is None:
        raise EnvironmentProblem(f"{root}: not a git working tree: a round's snapshot needs git")
    algorithm = _algorithm(root)
    entries: list[tuple[str, str, str]] = []  # (mode, oid, path)
    tokens: dict[str, str] = {}
    regular: list[tuple[str, str, str]] = []  # (path, mode, blob id computed here)
    gitlinks = None
    for rel in paths:
        full = root / rel
        if full.is_symlink():
            target = os.readlink(full).encode("utf-8", "surrogateescape")
            oid = _must(root, "hash-object", "-w", "--stdin", input=target)
            entries.append(("120000", oid, rel))
            tokens[rel] = "link:" + os.readlink(full)
        elif full.is_dir():
            if gitlinks is None:
                staged = _run(root, f"--work-tree={root}", "ls-files", "-z", "--stage").stdout.split("\0")
                gitlinks = {e.split("\t", 1)[1]: e.split()[1] for e in staged if e.startswith("160000 ")}
            if rel in gitlinks:
                entries.append(("160000", gitlinks[rel], rel))
                tokens[rel] = "dir"
        elif full.is_file():
            data = full.read_bytes()
            mode = "100755" if os.access(full, os.X_OK) else "100644"
            regular.append((rel, mode, _object_id(algorithm, "blob", data)))
            tokens[rel] = hashlib.sha256(data).hexdigest()
    if regular:
        stored = _must(root, "hash-object", "-w", "--no-filters", "--stdin-paths",
                       input="".join(f"{rel}\n" for rel, _, _ in regular).encode()).split()
        for (rel, mode, mine), oid in zip(regular, stored, strict=True):
            if oid != mine:
                raise EnvironmentProblem(f"{root / rel}: changed while its snapshot was taken; run again")
            entries.append((mode, oid, rel))
    parent = head(root)
    with tempfile.TemporaryDirectory(prefix="ascendopt-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        listing = "".join(f"{mode} {oid}\t{rel}\0" for mode, oid, rel in entries).encode()
        _must(root, "update-index", "-z", "--index-info", input=listing, env=env)
        tree = _must(root, "write-tree", env=env)
    commit = _must(root, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message,
                   env=_IDENTITY)
    _must(root, "update-ref", "-m", message, ref, commit)
    return Snapshot(commit, tree, content_digest(tokens), parent, ref)


def ref_commit(root: Path, ref: str) -> str | None:
    """The commit ``ref`` names; None when the ref does not exist (a fresh clone has no private refs)."""
    return _out(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")


def _listing(root: Path, commit: str, prefixes: Sequence[str]) -> set[tuple[str, str]] | None:
    proc = _run(root, "ls-tree", "-r", "-z", "--full-tree", commit)
    if proc.returncode != 0:
        return None
    out = set()
    for entry in proc.stdout.split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        if not skipped(path, prefixes):
            out.add((path, meta.split()[-1]))
    return out


def user_commit_holding(root: Path, snapshot_commit: str, exclude: Sequence[Path] = (),
                        depth: int = _USER_COMMITS_SEARCHED) -> str | None:
    """The newest of the last ``depth`` commits from HEAD whose files (the workspace and ``__pycache__``
    left out) are the snapshot's; None when none is."""
    prefixes = relative_prefixes(root, exclude)
    wanted = _listing(root, snapshot_commit, prefixes)
    if wanted is None:
        return None
    commits = (_out(root, "rev-list", f"--max-count={depth}", "HEAD") or "").split()
    for commit in commits:
        if _listing(root, commit, prefixes) == wanted:
            return commit
    return None


def diff_stat(root: Path, old: str | None, new: str) -> str:
    """``git diff --stat`` between two commits' trees (plumbing: no external diff, no textconv)."""
    if not old:
        return ""
    return _out(root, "diff-tree", "--stat", "--no-ext-diff", "--no-textconv", "-r", old, new) or ""


def store_file_commit(root: Path, ref: str, path: Path, name: str, message: str) -> str:
    """Store the file ``path`` as ``name`` in a one-file commit on ``ref`` (its parent: the commit ``ref``
    named before); returns the commit. The user's branch, index and working tree are not touched."""
    blob = _must(root, "hash-object", "-w", "--no-filters", str(path))
    tree = _must(root, "mktree", input=f"100644 blob {blob}\t{name}\n".encode())
    parent = ref_commit(root, ref)
    commit = _must(root, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, env=_IDENTITY)
    _must(root, "update-ref", "-m", message, ref, commit)
    return commit
