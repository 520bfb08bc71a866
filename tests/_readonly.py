"""Running a child process for which a folder is really read-only (not a mock of ``open``).

A permission bit does not stop root, and the tests run as root here and in CI, so the mechanism is chosen by
what this machine allows, in this order:

1. not root: the folder's write bits removed (``chmod -R a-w``), restored afterwards;
2. root, user namespaces allowed: the child runs in its own mount namespace (``unshare -rm``) where the folder
   is bind-mounted over itself read-only (``mount --bind -o ro``): every write under it is ``EROFS``, root's
   included;
3. root, no user namespaces (a container's seccomp): the child runs as ``nobody`` (``setpriv``) and the folder
   stays owned by root, mode 0755/0644.

None of them available: the test fails (``pytest.fail``), it never skips. Each run first proves the folder is
read-only for the child (a ``touch`` in it must fail), so a mechanism that silently protects nothing fails too.
``$ASCENDOPT_TEST_READONLY`` (chmod | unshare | setpriv) forces one, to try the others on a machine that has
several. ``readable_copy`` makes the folder's copy that all three can use (``nobody`` must reach it).
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

_BIND_RO = 'mount --bind -o ro "$1" "$1" || exit 97; shift; exec "$@"'
NOBODY = 65534


@functools.cache
def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    folder = tempfile.mkdtemp(prefix="ascendopt-ro-probe-")
    try:
        probe = subprocess.run(["unshare", "-rm", "sh", "-c", _BIND_RO, "sh", folder, "true"], capture_output=True,
                               timeout=30)
    finally:
        os.rmdir(folder)
    return probe.returncode == 0


def mechanism() -> str:
    """``chmod`` | ``unshare`` | ``setpriv``: how ``run_read_only`` makes a folder read-only on this machine."""
    forced = os.environ.get("ASCENDOPT_TEST_READONLY")
    if forced:
        assert forced in ("chmod", "unshare", "setpriv"), forced
        return forced
    if os.geteuid() != 0:
        return "chmod"
    if _unshare_works():
        return "unshare"
    if shutil.which("setpriv"):
        return "setpriv"
    pytest.fail("no way to make a folder read-only for a child process here: not root-free, no user namespaces "
                "(unshare -rm) and no setpriv; this test cannot be run truthfully, so it fails instead of skipping")


def _prefix(kind: str, folder: Path) -> list[str]:
    if kind == "unshare":
        return ["unshare", "-rm", "sh", "-c", _BIND_RO, "sh", str(folder)]
    if kind == "setpriv":
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return []


def readable_copy(source: Path, parent: Path) -> Path:
    """A copy of ``source`` in a new folder under ``parent`` if every folder above it lets others in (``nobody``
    must reach it under ``setpriv``), else under the system's temp folder; folders 0755, files 0644. The caller
    removes it (``shutil.rmtree(copy.parent)``)."""
    base = parent if all(p.stat().st_mode & stat.S_IXOTH for p in [parent, *parent.parents]) else None
    holder = Path(tempfile.mkdtemp(prefix="ascendopt-ro-", dir=base))
    holder.chmod(0o755)
    copy = holder / source.name
    shutil.copytree(source, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


def _chmod_tree(folder: Path, writable: bool) -> None:
    for path in [folder, *folder.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        path.chmod(mode | stat.S_IWUSR if writable else mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def run_read_only(folder: Path, argv: list[str], *, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """Run ``argv`` (a list; text output captured) with ``folder`` read-only for it; ``kwargs`` go to
    ``subprocess.run``. Proves first that a file cannot be created in ``folder`` by the same mechanism."""
    kind = mechanism()
    prefix = _prefix(kind, folder)
    if kind == "chmod":
        _chmod_tree(folder, writable=False)
    try:
        probe = subprocess.run([*prefix, "sh", "-c", 'touch "$1/.probe" 2>/dev/null || exit 42', "sh", str(folder)],
                               capture_output=True, timeout=60)
        assert probe.returncode == 42 and not (folder / ".probe").exists(), (
            f"{kind}: {folder} is not read-only for the child (exit {probe.returncode}): the test would prove nothing")
        return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=timeout, **kwargs)
    finally:
        if kind == "chmod":
            _chmod_tree(folder, writable=True)
