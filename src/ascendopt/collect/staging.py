"""Never a half-written profile folder: every run writes into a hidden staging folder inside
``out_dir`` and finished folders are renamed into place (same file system, so the rename is atomic).
A failure, timeout or Ctrl-C removes the staging folder and leaves ``out_dir`` as it was."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ascendopt.errors import UsageError

PREFIX = ".ascendopt-staging-"


def prepare_out_dir(out_dir: str | os.PathLike) -> Path:
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out-dir {path}: exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out-dir {path}: cannot create it ({exc.strerror})") from None
    return path.resolve()


@contextlib.contextmanager
def staging(out_dir: Path) -> Iterator[Path]:
    """A fresh hidden folder inside ``out_dir``; removed on exit whatever happens."""
    try:
        stage = Path(tempfile.mkdtemp(prefix=PREFIX, dir=out_dir))
    except OSError as exc:
        raise UsageError(f"--out-dir {out_dir}: cannot write there ({exc.strerror})") from None
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def publish(folders: list[Path], out_dir: Path) -> list[Path]:
    """Rename finished folders from the staging folder into ``out_dir``."""
    placed = []
    for folder in folders:
        target = out_dir / folder.name
        if target.exists():  # names carry a timestamp (and torch_npu's a pid): a clash is a real conflict
            raise UsageError(f"{target}: already exists; not overwriting a profile")
        os.replace(folder, target)
        placed.append(target)
    return placed
