"""The on-disk state of a task: ``.ascendopt/`` with the contract, rounds and profiles.

Layout (``root`` defaults to ``./.ascendopt``, or ``$ASCENDOPT_WORKSPACE``, or ``--workspace``)::

    contract.yaml          the frozen task contract (schema 1)
    rounds/0001.yaml ...   one record per optimize-round
    tune-cache.json        configurations measured by optimize-round --auto
    report.md, rounds.png  the last ``ascendopt report`` (default paths)
    profiles/<name>/ ...   profile folders collected by freeze/optimize-round/reprofile
    archive/<UTC stamp>/   the ledger of an earlier contract, moved aside by ``freeze --force``
    lock                   held (flock) by the command that writes

Every YAML document carries ``schema: 1``. Writes go to a temp file in the same folder, are
fsync'ed and renamed over the target, so a killed command leaves the previous file intact.

The *ledger* of a contract is the contract with everything measured under it: ``LEDGER``. A
re-freeze archives it (``archive_ledger``) so the new contract's rounds, stop criteria, report and
tune cache start over; profiles stay in ``profiles/`` (archived round records name them by path).
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ascendopt.errors import ContractError, UsageError

SCHEMA = 1
# What one contract's loop wrote, archived together on a re-freeze (profiles stay: see the docstring).
LEDGER = ("contract.yaml", "rounds", "tune-cache.json", "report.md", "rounds.png")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file + fsync + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
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

    @classmethod
    def resolve(cls, explicit: str | os.PathLike | None = None) -> Workspace:
        root = explicit or os.environ.get("ASCENDOPT_WORKSPACE") or ".ascendopt"
        return cls(Path(root).resolve())

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
        present = [name for name in LEDGER if (self.root / name).exists()]
        if not present:
            return None
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
            os.rename(stage, target)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        return target

    def drop_archived(self, archive: Path) -> None:
        """Remove the ledger files that ``archive`` holds copies of (after the new contract is written).
        ``rounds/`` is renamed away first, so it vanishes at once rather than file by file."""
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

    def require_contract(self) -> Path:
        if not self.contract_path.exists():
            raise UsageError(
                f"{self.contract_path}: no contract", hint="run `ascendopt freeze` first (or pass --workspace)"
            )
        return self.contract_path

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive, non-blocking lock: a second writer fails at once instead of interleaving."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "lock"
        fh = open(path, "a+", encoding="utf-8")
        try:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "another process"
                raise LockHeld(f"{path}: workspace is locked by {holder}",
                               hint="wait for the other ascendopt command to finish") from None
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()}")
            fh.flush()
            yield
        finally:
            try:
                fh.seek(0)
                fh.truncate()
            except ValueError:
                pass
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()
