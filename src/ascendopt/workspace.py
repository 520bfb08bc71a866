"""The on-disk state of a task: ``.ascendopt/`` with the contract, rounds and profiles.

Layout (``root`` defaults to ``./.ascendopt``, or ``$ASCENDOPT_WORKSPACE``, or ``--workspace``)::

    contract.yaml          the frozen task contract (schema 1)
    rounds/0001.yaml ...   one record per optimize-round
    tune-cache.json        configurations measured by optimize-round --auto
    report.md, rounds.png  the last ``ascendopt report`` (default paths; rounds-pairs.png: its timed pairs)
    profiles/<name>/ ...   profile folders collected by freeze/optimize-round/reprofile
    archive/<UTC stamp>/   the ledger of an earlier contract, moved aside by ``freeze --force``
    log.jsonl              the append-only audit log: one entry per command that wrote (``log_session``)
    lock                   held (flock) by the command that writes

Without ``--workspace`` or ``$ASCENDOPT_WORKSPACE`` the workspace is found like git finds ``.git``: the
first ``.ascendopt/`` folder in the current directory or a parent, up to the git root (the folder
holding ``.git``) or the filesystem root; none found: ``./.ascendopt`` (where ``freeze`` creates it).

Every YAML document carries ``schema: 1``. Writes go to a temp file in the same folder, are
fsync'ed and renamed over the target, so a killed command leaves the previous file intact.

The *ledger* of a contract is the contract with everything measured under it: ``LEDGER``. A
re-freeze archives it (``archive_ledger``) so the new contract's rounds, stop criteria, report and
tune cache start over; profiles stay in ``profiles/`` (archived round records name them by path).
The audit log is *not* archived: it is the workspace's history across contracts, and the re-freeze's
own entry names what moved where.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ascendopt.errors import AscendoptError, ContractError, EnvironmentProblem, IntegrityError, UsageError

SCHEMA = 1
# What one contract's loop wrote, archived together on a re-freeze (profiles stay: see the docstring).
LEDGER = ("contract.yaml", "rounds", "tune-cache.json", "report.md", "rounds.png", "rounds-pairs.png")
DIRNAME = ".ascendopt"  # the workspace folder's default name, searched for from the current directory up


# What a write can meet on a user's machine, said in words: a state of the machine, not a bug of ascendopt.
_WRITE_PROBLEMS = {
    errno.EACCES: "permission denied", errno.EPERM: "permission denied", errno.EROFS: "read-only file system",
    errno.EISDIR: "is a directory", errno.ENOTDIR: "a parent is not a directory", errno.EEXIST: "already exists",
    errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded", errno.ENAMETOOLONG: "name too long",
}
_FULL = {errno.ENOSPC, errno.EDQUOT}  # the machine's resources: exit 5 (environment), not the path's fault


class WriteFailed(UsageError):
    """A file or folder ascendopt must write cannot be: no permission, a read-only file system, a folder where a
    file goes (exit 2, a bad output path). ``NoSpace`` (a full disk, exit 5) is its environment twin."""


class NoSpace(EnvironmentProblem):
    """The disk (or quota) holding a file ascendopt writes is full (exit 5)."""


# free bytes below which a folder ascendopt (or a child it started) writes into counts as full: what the judge's
# children write there (a test report, saved outputs) is far larger than what a full disk leaves
FULL_BELOW = 1 << 20


def ensure_space(folder: Path, what: str) -> None:
    """NoSpace (exit 5) naming ``folder``'s disk when it is full (``FULL_BELOW``): called where a child's file
    there is missing or cut short, so that a full disk is said as one, not as a forged report or a dead
    workload."""
    import shutil

    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < FULL_BELOW:
        raise NoSpace(f"{folder}: no space left on the disk holding {what} ({free} bytes free)",
                      hint="free space there, or point TMPDIR at a disk with room")


def is_write_problem(exc: BaseException) -> bool:
    """Whether ``exc`` is an ``OSError`` a user's file system raises (``_WRITE_PROBLEMS``), not a bug."""
    return isinstance(exc, OSError) and exc.errno in _WRITE_PROBLEMS


def write_problem(exc: OSError, path: str | os.PathLike | None = None, *, doing: str | None = "cannot write"
                  ) -> AscendoptError:
    """The one-line error of an ``OSError`` met writing: ``PATH: cannot write (read-only file system)``; the path
    the system names (``exc.filename``) wins over ``path`` (the file the caller meant to write). ``doing`` None:
    what was being done is not known (the CLI's boundary), ``PATH: permission denied``."""
    where = exc.filename if exc.filename is not None else path
    reason = _WRITE_PROBLEMS.get(exc.errno) or (exc.strerror or type(exc).__name__).lower()
    cls = NoSpace if exc.errno in _FULL else WriteFailed
    name = os.fsdecode(where) if where is not None else "(unknown path)"
    return cls(f"{name}: {doing} ({reason})" if doing else f"{name}: {reason}")


@contextmanager
def writing(path: str | os.PathLike, *, name_it: bool = False) -> Iterator[None]:
    """Turn the file-system ``OSError``s of the block (``_WRITE_PROBLEMS``) into ``write_problem``'s one line
    naming the path the system names, else ``path`` (``name_it``: always ``path``, e.g. where the system would
    name a temp file); anything else passes through."""
    try:
        yield
    except OSError as exc:
        if not is_write_problem(exc):
            raise
        if name_it:
            exc.filename = None
        raise write_problem(exc, path) from None


def _umask() -> int:
    """The process's umask (read without changing it where ``/proc`` says it; else set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(path: Path) -> int:
    """The mode a file written at ``path`` gets: the mode of the file it replaces, else ``0o666 & ~umask`` (what
    ``open(path, "w")`` would give), so an atomic write is as readable as an ordinary one."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def check_output_path(path: str | os.PathLike, option: str) -> Path:
    """Before any work: ``path`` (the value of ``option``, e.g. ``--junit``) can be written as a file. Raises
    ``WriteFailed`` naming the path when it is a folder, when a parent is a file, or when the folder that would hold
    it does not let this process create a file there (probed by creating and removing one: permission bits, a
    read-only mount and root's privileges all answer truly). Creates nothing that stays."""
    path = Path(path)
    if path.is_dir():
        raise WriteFailed(f"{path}: is a directory ({option} needs a file path)")
    probe_folder(_nearest_folder(path.parent, path), path)
    return path


def check_output_folder(path: str | os.PathLike, option: str) -> Path:
    """Before any work: files can be created in the folder ``path`` (the value of ``option``, e.g. ``--out-dir``),
    or in the nearest existing folder above it when it does not exist yet; else ``WriteFailed`` naming it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise WriteFailed(f"{path}: not a directory ({option} needs a folder)")
    probe_folder(_nearest_folder(path, path), path)
    return path


def _nearest_folder(folder: Path, meant: Path) -> Path:
    """``folder`` or its nearest existing parent (where a write of ``meant`` starts); one that is a file is
    ``WriteFailed``."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise WriteFailed(f"{meant}: cannot write ({folder} is not a directory)")
    return folder


def probe_folder(folder: Path, meant: str | os.PathLike) -> None:
    """Create and remove a file in ``folder``; a file-system refusal is ``write_problem`` naming ``meant``."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".ascendopt-probe-", suffix=".tmp", dir=folder)  # .tmp: never logged
    except OSError as exc:
        if not is_write_problem(exc):
            raise
        exc.filename = None
        raise write_problem(exc, meant) from None
    os.close(fd)
    os.unlink(probe)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file + fsync + rename). The file gets the mode of the file it
    replaces, else ``0o666 & ~umask`` (``new_file_mode``); a write the file system refuses is ``WriteFailed`` (exit
    2) or ``NoSpace`` (exit 5) naming ``path``, and leaves the previous file as it was."""
    path = Path(path)
    with writing(path, name_it=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = new_file_mode(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise


def dump_yaml(data: dict[str, Any]) -> str:
    body = {"schema": SCHEMA, **{k: v for k, v in data.items() if k != "schema"}}
    return yaml.safe_dump(body, sort_keys=False, default_flow_style=False, allow_unicode=True, width=110)


def write_yaml(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, dump_yaml(data))


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a schema-1 YAML mapping; every problem names the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContractError(f"{path}: not found") from None
    except UnicodeDecodeError:
        raise ContractError(f"{path}: not a text file") from None
    except IsADirectoryError:  # a damaged workspace: for the contract, an integrity failure (contract.load_raw)
        raise ContractError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({(exc.strerror or type(exc).__name__).lower()})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ContractError(f"{path}: not valid YAML{where}") from None
    if not isinstance(data, dict):
        raise ContractError(f"{path}: expected a mapping at the top level")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise ContractError(f"{path}: schema: expected {SCHEMA}, found {schema!r}")
    return data


class LockHeld(UsageError):
    """Another ascendopt command is writing this workspace."""


@dataclass(frozen=True)
class Workspace:
    root: Path
    # where ``root`` came from ("--workspace", "$ASCENDOPT_WORKSPACE"; empty: found or the default), so that
    # an error about a missing contract names the setting that pointed there
    source: str = field(default="", compare=False)

    @classmethod
    def resolve(cls, explicit: str | os.PathLike | None = None, *, start: Path | None = None) -> Workspace:
        """``explicit`` (``--workspace``), else ``$ASCENDOPT_WORKSPACE``, else the nearest ``.ascendopt/``
        from ``start`` (default: the current directory) up (``find_workspace``), else ``./.ascendopt``. A workspace
        found above the current directory is said on stderr (which one this command uses)."""
        if explicit:
            return cls(Path(explicit).resolve(), "--workspace")
        if os.environ.get("ASCENDOPT_WORKSPACE"):
            return cls(Path(os.environ["ASCENDOPT_WORKSPACE"]).resolve(), "$ASCENDOPT_WORKSPACE")
        here = Path(start or Path.cwd()).resolve()
        found = find_workspace(here)
        if found is not None and found.parent != here:
            from ascendopt import console

            console.status(f"workspace: {found} (found above {here})")
        return cls(found or here / DIRNAME)

    @property
    def contract_path(self) -> Path:
        return self.root / "contract.yaml"

    @property
    def rounds_dir(self) -> Path:
        return self.root / "rounds"

    @property
    def profiles_dir(self) -> Path:
        return self.root / "profiles"

    @property
    def tune_cache_path(self) -> Path:
        return self.root / "tune-cache.json"

    @property
    def screen_cache_path(self) -> Path:
        """``--auto``'s screening numbers: keyed by kernel source, not by contract (not part of the ledger)."""
        return self.root / "screen-cache.json"

    @property
    def archive_dir(self) -> Path:
        return self.root / "archive"

    def archive_ledger(self) -> Path | None:
        """Move this workspace's ledger (``LEDGER``) aside into ``archive/<UTC stamp>/``; the caller holds
        the lock and writes the new contract in between (``replace``). Returns the archive folder, None
        when there was nothing to archive.

        Crash-safe in this order: the ledger is *copied* into a hidden folder that is renamed into place
        complete, then ``replace()`` (the new contract's atomic write) runs, then the old files are
        removed. An interruption before the new contract leaves the old state intact (plus at most a
        finished archive copy); after it, the new contract plus the archive, and old round files not yet
        removed are ignored by ``RoundContext`` as another contract's.
        """
        self.check_ledger_shape()  # nothing is archived of a damaged workspace
        present = [name for name in LEDGER if (self.root / name).exists()]
        if not present:
            return None
        with writing(self.archive_dir):
            self.archive_dir.mkdir(parents=True, exist_ok=True)
            stage = Path(tempfile.mkdtemp(prefix=".archive-", dir=self.archive_dir))
        try:
            for name in present:
                src = self.root / name
                (shutil.copytree if src.is_dir() else shutil.copy2)(src, stage / name)
            stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            target, n = self.archive_dir / stamp, 1
            while target.exists():  # two re-freezes within one second
                n += 1
                target = self.archive_dir / f"{stamp}-{n}"
            with writing(target):
                os.rename(stage, target)
        except BaseException as exc:
            shutil.rmtree(stage, ignore_errors=True)
            if is_write_problem(exc):
                raise write_problem(exc, self.archive_dir) from None  # type: ignore[arg-type]
            raise
        return target

    def drop_archived(self, archive: Path) -> None:
        """Remove the ledger files that ``archive`` holds copies of (after the new contract is written).
        ``rounds/`` is renamed away first, so it vanishes at once rather than file by file."""
        with writing(self.root):
            self._drop_archived(archive)

    def _drop_archived(self, archive: Path) -> None:
        for name in LEDGER:
            src = self.root / name
            if name == "contract.yaml" or not (archive / name).exists() or not src.exists():
                continue
            if src.is_dir():
                doomed = Path(tempfile.mkdtemp(prefix=f".{name}-archived-", dir=self.root))
                os.replace(src, doomed / name)
                shutil.rmtree(doomed, ignore_errors=True)
            else:
                src.unlink()

    def round_path(self, number: int) -> Path:
        return self.rounds_dir / f"{number:04d}.yaml"

    def round_numbers(self) -> list[int]:
        if not self.rounds_dir.is_dir():
            return []
        nums = []
        for p in self.rounds_dir.glob("*.yaml"):
            if p.stem.isdigit():
                nums.append(int(p.stem))
        return sorted(nums)

    @property
    def log_path(self) -> Path:
        return self.root / LOG_NAME

    @property
    def lock_path(self) -> Path:
        return self.root / "lock"

    def require_contract(self) -> Path:
        self.check_ledger_shape()
        if not self.contract_path.exists():
            raise self.no_contract()
        return self.contract_path

    def no_contract(self) -> UsageError:
        """The one-line error for a workspace without a contract: a file given for the folder, a folder that does
        not exist, or one never frozen, naming the setting that chose it (``source``)."""
        if not self.source:  # found by looking up from the current folder, or the default
            return UsageError(f"{self.root}: no ascendopt workspace here or above (no contract.yaml)",
                              hint=FREEZE_HINT)
        # the path leads alone, so that the envelope's ``where`` is the path (``cli.envelope.where_of``)
        if self.root.is_file():
            return UsageError(f"{self.root}: a file, not a workspace folder, so no contract (from {self.source})",
                              hint="pass the workspace folder, e.g. -w .ascendopt")
        if not self.root.exists():
            return UsageError(f"{self.root}: no contract, no such folder (from {self.source})", hint=FREEZE_HINT)
        return UsageError(f"{self.root}: no contract, no contract.yaml in it (from {self.source})", hint=FREEZE_HINT)

    @contextmanager
    def lock(self) -> Iterator[WriteSession]:
        """Exclusive, non-blocking lock: a second writer fails at once instead of interleaving.

        Yields the ``WriteSession``: on release, what the holder wrote under the workspace is appended
        to the audit log as one entry (``log_session``), while the lock is still held; the holder may set
        ``session.exit_code`` (e.g. a round recorded as a drop exits 1)."""
        path = self.lock_path
        with writing(path):
            self.root.mkdir(parents=True, exist_ok=True)
            fh = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held until the finally below
        try:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "another process"
                raise LockHeld(f"{path}: workspace is locked by {holder}",
                               hint="wait for the other ascendopt command to finish") from None
            fh.seek(0)
            killed = fh.read().strip()  # a holder's "pid N" left behind: it was killed before releasing
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()}")
            fh.flush()
            session = WriteSession(self)
            _HELD[self.root] = session
            failure: BaseException | None = None
            try:
                if killed:
                    log_recovery(self, killed)
                yield session
            except BaseException as exc:
                failure = exc
                raise
            finally:
                try:
                    with writing(self.log_path):  # a full disk or a read-only log: one line naming the log
                        session.close(failure)  # appended while the lock is still held
                finally:
                    _HELD.pop(self.root, None)
        finally:
            try:
                fh.seek(0)
                fh.truncate()
            except ValueError:
                pass
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()

    def held_by_this_process(self) -> WriteSession | None:
        """The open write session when this process holds the lock, else None."""
        return _HELD.get(self.root)

    def killed_holder(self) -> str | None:
        """``pid N`` of a writer killed while it held the lock (its record is still in the lock file and
        nobody holds the lock), else None: its last writes may not be in the audit log."""
        if self.root in _HELD or not self.lock_path.is_file() or self.held_elsewhere():
            return None
        try:
            return self.lock_path.read_text(encoding="utf-8").strip() or None
        except OSError:  # unreadable: nothing to say about a killed writer
            return None

    def held_elsewhere(self) -> bool:
        """Whether another process holds the writer lock now (a write may be half logged). Reads only: the lock
        file is opened read-only (``flock`` needs no write access), so a read-only workspace can be read."""
        if self.root in _HELD or not self.lock_path.is_file():
            return False
        try:
            fh = open(self.lock_path, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError:  # unreadable lock file: no way to tell, and nothing a reader could do about it
            return False
        with fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False

    def check_writable(self) -> None:
        """Before a command that writes this workspace does any work: the ledger's files are files (a folder
        named ``contract.yaml`` is a damaged workspace: ``IntegrityError``, exit 3, as a truncated contract is),
        and the workspace folder (or the folder that would hold it) lets this process create files
        (``WriteFailed``, exit 2, naming it). Creates nothing that stays."""
        self.check_ledger_shape()
        check_output_folder(self.root, "--workspace")
        if self.lock_path.is_dir():
            raise WriteFailed(f"{self.lock_path}: cannot write (is a directory)")
        for path in (self.rounds_dir, self.profiles_dir, self.archive_dir):
            if path.exists() and not path.is_dir():
                raise WriteFailed(f"{path}: cannot write (not a directory)")
            if path.is_dir():
                probe_folder(path, path)

    def check_ledger_shape(self) -> None:
        """The ledger's file entries are files, ``rounds`` a folder; else ``IntegrityError`` naming the first."""
        for name in LEDGER:
            path = self.root / name
            if path.exists() and path.is_dir() != (name == "rounds"):
                what = "a directory, not a file" if path.is_dir() else "a file, not a directory"
                raise IntegrityError(f"{path}: is {what} (a damaged workspace: move it aside, or remove it)")


# What of the workspace is committed with the code (the ledger the gate checks, so CI can check it from a
# fresh clone) and what stays on this machine: ``freeze`` writes this ``.gitignore`` into the workspace.
COMMITTED = ("contract.yaml", "log.jsonl", "tune-cache.json", "rounds/*.yaml")
GITIGNORE = ("# written by `ascendopt freeze`: commit the ledger (the contract, its audit log, the round records\n"
             "# and the tune cache) with your code; profiles, archives, reports, caches and the lock stay local.\n"
             "*\n!.gitignore\n!rounds/\n" + "".join(f"!{name}\n" for name in COMMITTED))


def write_gitignore(ws: Workspace) -> None:
    """Write ``GITIGNORE`` as the workspace's ``.gitignore`` unless the user has one of their own."""
    path = ws.root / ".gitignore"
    if not path.exists():
        atomic_write_text(path, GITIGNORE)


FREEZE_HINT = ("run `ascendopt freeze` first: `ascendopt freeze --kernel NAME` (bundled kernel) or `ascendopt freeze "
               "--exec-file FILE --test PATH --kernel-filter S` (own code); or pass --workspace")


def find_workspace(start: Path) -> Path | None:
    """The nearest ``.ascendopt/`` folder in ``start`` or a parent, searched up to the git root (the first
    folder holding ``.git``) or the filesystem root; None when there is none."""
    for folder in (start, *start.parents):
        candidate = folder / DIRNAME
        if candidate.is_dir():
            return candidate
        if (folder / ".git").exists():
            return None
    return None


# Sessions of the writer lock this process holds, by workspace root.
_HELD: dict[Path, WriteSession] = {}


class WriteSession:
    """One holder of the writer lock: what the workspace looked like when it was taken, so its release can
    log what changed (``log_session``)."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self.exit_code = 0
        # what the holder is, when it may write the contract: "freeze" or "adopt" (``LEDGER_EVENTS``)
        self.event: str | None = None
        self.before = scan_files(ws.root)

    def wrote(self, relpath: str) -> bool:
        """Whether ``relpath`` changed during this session (this command's write, not logged yet)."""
        path = self.ws.root / relpath
        now = _stamp(path) if path.is_file() else None
        return now != self.before.get(relpath)

    def close(self, failure: BaseException | None) -> None:
        from ascendopt import console

        try:
            log_session(self, failure)
        except Exception as exc:  # noqa: BLE001 - logging must never hide the command's own outcome
            if failure is None:
                raise
            console.warn(f"{self.ws.log_path}: not appended ({exc})")


# -- the audit log ------------------------------------------------------------------------------
#
# ``log.jsonl``: one JSON object per line, appended (never rewritten) by every command that wrote the
# workspace, when it releases the writer lock (so appends are serialized by that lock):
#
#   {"time", "command" (the command line), "git" (HEAD of the current repository or null), "result"
#    ("ok" | "error"), "exit_code", "error" (one line or null), "wrote" {path: sha256}, "removed" [path],
#    "pid", "prev" (the previous entry's digest, null for the first), "digest" (sha256 of this entry
#    without "digest", canonical JSON)}
#
# Files are named relative to the workspace; a file deeper than ``folder/file`` is logged as its
# two-level folder (``profiles/round-0001-PipeUtilization/``) with one digest over its files, so a
# profile of hundreds of files is one key. The first entry of a workspace that had files before it had
# a log (an older ascendopt) carries ``adopted`` {path: sha256}: hand edits are detected from there on.
# A writer killed mid-append leaves at most a torn last line: readers skip it (``LogRead.torn``) and
# the next writer starts on a fresh line, chained to the last whole entry.

LOG_NAME = "log.jsonl"
# Written by ascendopt only, compared with the log by the gate: the contract, the round records and the
# tune cache (the best configuration is the latest keep's record; --auto's measurements are the cache).
_NOT_LOGGED = ("lock", LOG_NAME)


def sha256_file(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stamp(path: Path) -> tuple[int, int, int]:
    """What tells a rewrite: size, mtime and inode (an atomic write renames a new inode into place)."""
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


def scan_files(root: Path) -> dict[str, tuple[int, int, int]]:
    """``{relative path: (size, mtime ns, inode)}`` of every file under the workspace but the lock, the log and
    the temp files of writes in flight."""
    out: dict[str, tuple[int, int, int]] = {}
    if not root.is_dir():
        return out
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # staging folders of archive / drop
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            if rel in _NOT_LOGGED or (name.startswith(".") and name.endswith(".tmp")):
                continue
            try:
                out[rel] = _stamp(Path(folder) / name)
            except FileNotFoundError:
                continue
    return out


def log_key(relpath: str) -> str:
    """The key a file is logged under: itself up to ``folder/file``, else its two-level folder + ``/``."""
    parts = relpath.split("/")
    return relpath if len(parts) <= 2 else "/".join(parts[:2]) + "/"


def file_digests(root: Path, relpaths: list[str]) -> dict[str, str]:
    """``{log key: sha256}`` of these files; a folder key's digest covers its files' paths and digests."""
    import hashlib

    single: dict[str, str] = {}
    folders: dict[str, list[str]] = {}
    for rel in sorted(relpaths):
        key = log_key(rel)
        path = root / rel
        if not path.is_file():
            continue
        if key.endswith("/"):
            folders.setdefault(key, []).append(f"{rel}\0{sha256_file(path)}\n")
        else:
            single[key] = sha256_file(path)
    for key, lines in folders.items():
        single[key] = hashlib.sha256("".join(lines).encode()).hexdigest()
    return dict(sorted(single.items()))


def entry_digest(entry: dict[str, Any]) -> str:
    import hashlib
    import json

    body = {k: v for k, v in entry.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# The command line this process runs (set by the CLI's entry point); library callers log ``sys.argv``.
_INVOCATION: dict[str, list[str] | None] = {"argv": None}


def set_invocation(argv: list[str] | None) -> None:
    """The CLI's arguments (without the program name); None: back to ``sys.argv``."""
    _INVOCATION["argv"] = None if argv is None else ["ascendopt", *argv]


def invocation() -> str:
    import shlex
    import sys

    argv = _INVOCATION["argv"] or [Path(sys.argv[0]).name, *sys.argv[1:]]
    return shlex.join(argv)


@dataclass
class LogRead:
    """The audit log as read: its whole entries (each with ``"line"``: 1-based line number, added on
    read), the line numbers of torn lines skipped, and the problems that mean a hand edit (one line each,
    naming the file and line)."""

    entries: list[dict[str, Any]]
    torn: list[int]
    problems: list[str]
    ends_with_newline: bool = True

    @property
    def last_digest(self) -> str | None:
        return self.entries[-1]["digest"] if self.entries else None

    def state(self) -> dict[str, tuple[str, int]]:
        """``{log key: (sha256, line)}`` as the log says the workspace was left (removed keys dropped)."""
        out: dict[str, tuple[str, int]] = {}
        for entry in self.entries:
            for key, digest in {**(entry.get("adopted") or {}), **(entry.get("wrote") or {})}.items():
                out[key] = (digest, entry["line"])
            for key in entry.get("removed") or []:
                out.pop(key, None)
        return out


def read_log(ws: Workspace) -> LogRead:
    """Read ``log.jsonl``; never raises for its content. A line that is not JSON is torn (a killed writer)
    when the chain runs on past it, else a problem; an entry whose digest or ``prev`` does not match is a
    problem (edited or removed by hand)."""
    import json

    path = ws.log_path
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return LogRead([], [], [])
    lines = raw.split(b"\n")
    ends = raw.endswith(b"\n") or not raw
    if lines and lines[-1] == b"":
        lines.pop()
    entries: list[dict[str, Any]] = []
    torn: list[int] = []
    problems: list[str] = []
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line.decode("utf-8"))
            if not isinstance(entry, dict) or "digest" not in entry:
                raise ValueError("not an entry")
        except (UnicodeDecodeError, ValueError):
            torn.append(number)
            continue
        entry.pop("line", None)
        if entry_digest(entry) != entry["digest"]:
            problems.append(f"{path}: line {number}: edited by hand (its digest does not match its content)")
        expected = entries[-1]["digest"] if entries else None
        if entry.get("prev") != expected:
            problems.append(f"{path}: line {number}: the entry before it was removed or edited (chain broken)")
        entries.append({**entry, "line": number})
    return LogRead(entries, torn, problems, ends)


@contextmanager
def _log_writer(ws: Workspace, wait_s: float = 30.0) -> Iterator[None]:
    """The writer lock for one append: already held by this process's session, else taken blocking (up
    to ``wait_s``), so concurrent appends never interleave and the chain stays linear."""
    import time

    if ws.root in _HELD:
        yield
        return
    with writing(ws.lock_path):
        ws.root.mkdir(parents=True, exist_ok=True)
        fh = open(ws.lock_path, "a+", encoding="utf-8")  # noqa: SIM115 - closed by the with below
    with fh:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockHeld(f"{ws.lock_path}: still locked after {wait_s:g} s; {ws.log_path} not appended",
                                   hint="wait for the other ascendopt command to finish") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def append_log(ws: Workspace, entry: dict[str, Any]) -> dict[str, Any]:
    """Append one entry (``prev`` and ``digest`` filled in) under the writer lock; returns it. The line is
    one ``write`` of an ``O_APPEND`` file, fsync'ed; after a torn last line it starts on a new line."""
    import json

    with _log_writer(ws):
        before = read_log(ws)
        body = {**entry, "prev": before.last_digest}
        body.pop("digest", None)
        body["digest"] = entry_digest(body)
        line = json.dumps(body, sort_keys=False, separators=(",", ":"), ensure_ascii=False, default=str) + "\n"
        if not before.ends_with_newline:
            line = "\n" + line
        fd = os.open(ws.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        _advance_log_ref(ws, before, body)
    return body


def log_session(session: WriteSession, failure: BaseException | None) -> dict[str, Any] | None:
    """Log what ``session`` wrote (nothing written and no failure: no entry). Result and exit code from
    ``failure`` (an exception leaving the lock) or ``session.exit_code``."""

    ws = session.ws
    after = scan_files(ws.root)
    changed = [rel for rel, stamp in after.items() if session.before.get(rel) != stamp]
    gone = [rel for rel in session.before if rel not in after]
    if not changed and not gone:
        return None
    if failure is None:
        code, message = session.exit_code, None
    elif isinstance(failure, AscendoptError):
        code, message = int(failure.exit_code), str(failure)
    elif isinstance(failure, KeyboardInterrupt) or hasattr(failure, "signum"):
        # Ctrl-C, or the CLI's SIGINT / SIGTERM interrupt (cli.exits.Interrupted carries its 130 / 143)
        code, message = int(getattr(failure, "exit_code", 130)), f"interrupted ({failure or 'SIGINT'})"
    else:
        code, message = 70, f"{type(failure).__name__}: {failure}"
    touched = {log_key(rel) for rel in changed}  # a folder key is digested whole when any file in it changed
    wrote = file_digests(ws.root, sorted(rel for rel in after if log_key(rel) in touched))
    removed = sorted({log_key(rel) for rel in gone} - set(wrote))
    entry: dict[str, Any] = {"time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
                             "command": invocation(), "git": _git_head(), "result": "ok" if code == 0 else "error",
                             "exit_code": code, "error": message, "wrote": wrote, "removed": removed,
                             "pid": os.getpid()}
    if session.event:
        entry["event"] = session.event
    if not ws.log_path.exists():
        earlier = [rel for rel in session.before if rel in after and rel not in changed]
        if earlier:  # a workspace of an older ascendopt: its files as they are now start the record
            entry["adopted"] = file_digests(ws.root, earlier)
            entry["note"] = ("the audit log starts here: files written before it are adopted as they are "
                             "(hand edits before this entry cannot be detected)")
    return append_log(ws, entry)


# -- the log's head as a private ref ---------------------------------------------------------------
#
# After every append the log's head is also kept in the repository that holds the workspace, as a commit
# on ``refs/ascendopt/log`` (``vcs.private_ref``) whose tree is the log as written and whose message names
# the head entry's digest. The ref advances only along the chain (the head it names is an entry of the log
# appended to) or at a freeze or an adopt: a log deleted, truncated or replaced by an older or a forged one
# no longer holds the head the ref names, and the gate says so (exit 3). A fresh clone has no private refs:
# then nothing is compared (the committed log is checked on its own).

LOG_REF = "log"
LEDGER_EVENTS = ("freeze", "adopt")  # the entries that may write the contract
_LOG_HEAD = "ascendopt audit log head "


def _log_repo(ws: Workspace) -> Path | None:
    from ascendopt import vcs

    folder = ws.root if ws.root.is_dir() else ws.root.parent
    try:
        return vcs.toplevel(folder)
    except Exception:  # noqa: BLE001 - no git: the workspace has no ref
        return None


def log_ref_head(ws: Workspace) -> tuple[str, str] | None:
    """``(ref, head entry digest)`` the log's private ref names; None without git or without the ref."""
    from ascendopt import vcs

    repo = _log_repo(ws)
    if repo is None:
        return None
    ref = vcs.private_ref(repo, ws.root, LOG_REF)
    commit = vcs.ref_commit(repo, ref)
    if commit is None:
        return None
    found = vcs.read_objects(repo, [commit]).get(commit)
    message = found[1].split(b"\n\n", 1)[-1].decode(errors="replace") if found else ""
    digest = message.split(_LOG_HEAD, 1)[1].split()[0] if _LOG_HEAD in message else ""
    return ref, digest


def _advance_log_ref(ws: Workspace, before: LogRead, body: dict[str, Any]) -> None:
    """Point the log's ref at the log just appended (``body`` its new head), when the ref is absent, names
    an entry of the log as it was (``before``), or ``body`` is a freeze or an adopt."""
    from ascendopt import vcs

    repo = _log_repo(ws)
    if repo is None:
        return
    try:
        named = log_ref_head(ws)
        if named is not None and body.get("event") not in LEDGER_EVENTS and \
                named[1] not in {e["digest"] for e in before.entries}:
            return  # the log was replaced: leave the ref where it was, for the gate to see
        ref = vcs.private_ref(repo, ws.root, LOG_REF)
        vcs.store_file_commit(repo, ref, ws.log_path, LOG_NAME, f"{_LOG_HEAD}{body['digest']}")
    except AscendoptError as exc:  # a repository git cannot write: the log itself is appended
        from ascendopt import console

        console.warn(f"{ws.log_path}: its head was not recorded in git ({exc})")


def _git_head() -> str | None:
    from ascendopt.process import git

    return git("rev-parse", "HEAD", cwd=Path.cwd())


def ledger_files(ws: Workspace) -> list[str]:
    """The files the gate compares with the log, relative to the workspace: the contract, the round
    records and the tune cache (what decides the best configuration), those that exist."""
    names = [name for name in ("contract.yaml", "tune-cache.json") if (ws.root / name).is_file()]
    return names + [f"rounds/{ws.round_path(n).name}" for n in ws.round_numbers()]


@dataclass(frozen=True)
class AuditCheck:
    """The ledger against the log: ``problems`` as ``(path, one line)`` (each a hand edit: exit 3),
    ``notes`` what could not be checked and why."""

    problems: list[tuple[str, str]]
    notes: list[str]
    checked: int


def _ledger_drift(ws: Workspace, log: LogRead,
                  session: WriteSession | None = None) -> tuple[dict[str, str], list[str], list[tuple[str, str]]]:
    """How the ledger differs from what the log last recorded: ``({path: sha256 now} for files changed or
    never logged, [paths] logged but gone, [(absolute path, one line)] saying each)``. This process's own
    writes in ``session`` (not logged yet) are left out."""
    state = log.state()
    present = ledger_files(ws)
    changed: dict[str, str] = {}
    messages: list[tuple[str, str]] = []
    for rel in present:
        if session is not None and session.wrote(rel):
            continue  # this command's own write: logged when it releases the lock
        path = ws.root / rel
        digest = sha256_file(path)
        if rel not in state:
            changed[rel] = digest
            messages.append((str(path), f"{path}: not in the audit log {ws.log_path.name} (written outside "
                                        "ascendopt)"))
        elif digest != state[rel][0]:
            changed[rel] = digest
            messages.append((str(path), f"{path}: edited by hand since ascendopt wrote it ({ws.log_path.name} "
                                        f"line {state[rel][1]})"))
    ledger_like = {k for k in state if k in ("contract.yaml", "tune-cache.json") or
                   (k.startswith("rounds/") and not k.endswith("/"))}
    removed = sorted(ledger_like - set(present))
    for rel in removed:
        path = ws.root / rel
        messages.append((str(path), f"{path}: removed by hand ({ws.log_path.name} line {state[rel][1]} "
                                    "recorded it)"))
    return changed, removed, messages


def log_recovery(ws: Workspace, killed: str) -> dict[str, Any] | None:
    """A writer (``killed``: its ``pid N``) was killed while it held the lock: the ledger files it wrote
    and never logged are recorded now, in an entry that says so, by the next holder of the lock (the
    caller). No log yet, or nothing unlogged: no entry."""
    if not ws.log_path.exists():
        return None
    changed, removed, _ = _ledger_drift(ws, read_log(ws))
    if not changed and not removed:
        return None
    return append_log(ws, {"time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
                           "command": f"(recovered: {killed} was killed before it logged its writes)",
                           "git": None, "result": "error", "exit_code": 137,
                           "error": f"{killed} was killed while it held {ws.lock_path.name}",
                           "wrote": changed, "removed": removed, "pid": os.getpid()})


def check_ledger(ws: Workspace) -> AuditCheck:
    """Each ledger file must be as the log last recorded it (this process's own writes not logged yet
    excepted); a ledger file the log records but that is gone is a problem too, and so is a log whose
    chain is broken. No log (a workspace of an older ascendopt, or nothing written yet): nothing to
    compare, a note. A writer holding the lock in another process: its writes are not logged yet, so the
    comparison is left out with a note. A writer killed while it held the lock: the differences are
    notes, not problems (its last writes were never logged; the next writing command records them,
    ``log_recovery``), while round records are still checked against their own digests by the gate."""
    log = read_log(ws)
    notes = [f"{ws.log_path}: line(s) {', '.join(map(str, log.torn))} torn (a writer was killed mid-append); "
             "skipped"] if log.torn else []
    problems = [(str(ws.log_path), text) for text in log.problems]
    if ws.held_elsewhere():
        notes.append(f"{ws.lock_path}: another command is writing: the ledger was not compared with the log")
        return AuditCheck(problems, notes, 0)
    head = log_ref_head(ws)
    if head is not None and head[1] not in {e["digest"] for e in log.entries}:
        what = "deleted" if not ws.log_path.exists() else "truncated, rolled back or replaced"
        problems.append((str(ws.log_path), f"{ws.log_path}: {what}: it does not hold the head entry {head[1][:12]} "
                                           f"that {head[0]} recorded (`ascendopt adopt` accepts the log as it is)"))
    if not ws.log_path.exists():
        if ws.contract_path.exists() and not problems:
            problems.append((str(ws.log_path), f"{ws.log_path}: missing: {ws.contract_path.name} exists without the "
                                               "audit log of the freeze that made it (deleted, not committed with "
                                               "the contract, or a workspace of an older ascendopt: `ascendopt "
                                               "adopt` adopts it)"))
        return AuditCheck(problems, notes, 0)
    session = ws.held_by_this_process()
    _, _, drift = _ledger_drift(ws, log, session)
    killed = ws.killed_holder()
    if killed and drift:
        notes.append(f"{ws.lock_path}: {killed} was killed while writing; not logged yet (the next writing command "
                     f"records them): " + "; ".join(text for _, text in drift))
    else:
        problems += drift
        if not (session is not None and session.wrote("contract.yaml")):
            problems += _contract_origin(ws, log)
    return AuditCheck(problems, notes, len(ledger_files(ws)))


def _contract_origin(ws: Workspace, log: LogRead) -> list[tuple[str, str]]:
    """The contract must have been written by a freeze (or accepted by an adopt) that the log records: the
    last entry that wrote or adopted ``contract.yaml`` is a ``freeze`` or ``adopt`` event. A contract edited
    and resealed with ascendopt's own functions under the lock is logged too, but not as a freeze."""
    if not ws.contract_path.exists():
        return []
    writer = None
    for entry in log.entries:
        if "contract.yaml" in {**(entry.get("adopted") or {}), **(entry.get("wrote") or {})}:
            writer = entry
    path = str(ws.contract_path)
    if writer is None:
        return [(path, f"{path}: the audit log {ws.log_path.name} records no freeze that wrote it")]
    if writer.get("event") not in LEDGER_EVENTS:
        return [(path, f"{path}: last written by {ws.log_path.name} line {writer['line']} ({writer.get('command')!r}), "
                       "not by a freeze: the contract was rewritten outside `ascendopt freeze` (re-freeze with "
                       "`ascendopt freeze --force`, or `ascendopt adopt` to accept it)")]
    return []


def adopt(ws: Workspace) -> dict[str, Any]:
    """Accept the workspace as it is (``ascendopt adopt``): under the lock, append one ``adopt`` entry that
    records every file of the workspace with its digest (``adopted``) and the problems it accepts, and move
    the log's ref to it. Nothing to adopt (the log chains to the freeze, no problem): no entry. Returns
    ``{"adopted": {path: sha256}, "accepted": [problem], "entry": line or None}``."""
    if not ws.contract_path.is_file():
        raise UsageError(f"{ws.contract_path}: no contract to adopt", hint=FREEZE_HINT)
    with ws.lock() as session:
        audit = check_ledger(ws)
        accepted = [text for _, text in audit.problems]
        if ws.log_path.exists() and not accepted:
            return {"adopted": {}, "accepted": [], "entry": None}
        files = sorted(scan_files(ws.root))
        entry = append_log(ws, {
            "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
            "command": invocation(), "git": _git_head(), "result": "ok", "exit_code": 0, "error": None,
            "wrote": {}, "removed": [], "pid": os.getpid(), "event": "adopt",
            "adopted": file_digests(ws.root, files), "accepted": accepted})
        session.before = scan_files(ws.root)  # logged by the adopt entry: nothing more at release
    return {"adopted": entry["adopted"], "accepted": accepted, "entry": len(read_log(ws).entries)}
