"""What the frozen test run used, pinned: the files a test run loads besides the frozen test files.

The reporting plugin (``judge.pytest_report``) lists what the run imported, opened, registered as a
conftest and read as its configuration (absolute paths). Here those become repository-relative paths
(``../`` for a file above the repository) of four kinds:

* ``config``: the configuration file pytest read, wherever it is (a file pytest reads one section of,
  ``pyproject.toml`` / ``tox.ini`` / ``setup.cfg``, as ``file::[section]``, as ``frozen`` pins it), and
  every conftest it registered, wherever it is: pinned as ``role: test-config``;
* ``module``: a module file in the repository the run imported (helpers, reference implementations);
* ``data``: a file in the repository the run opened for reading and never wrote (expected outputs,
  reference data): both pinned as ``role: test-support``.

Files of the installed environment (under ``sys.prefix``, a ``site-packages`` folder) are the
environment's and not pinned. The target code (``Contract.targets``: the files a round is meant to
change) is left out: at freeze by default what ``workload()`` imports from the repository (the baseline's
worker, after its module code and calls, lists the modules it loaded: ``repository_files``), else ``freeze
--target PATH...`` (a folder stands for every file under it).

Freeze pins what the baseline's run used (``pins``); the integrity stage checks the pinned files'
digests before the run (``contract.frozen.check_frozen_files``), and after the run the gate fails
integrity for a file that takes part now and was not pinned (``newcomers``: a new conftest, a new
helper module, another configuration file).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ascendopt.contract.model import FrozenFile
from ascendopt.judge import environment

CONFIG_SECTIONS = {"pyproject.toml": "tool.pytest", "tox.ini": "pytest", "setup.cfg": "tool:pytest"}
ROLE = {"config": "test-config", "module": "test-support", "data": "test-support"}


def relative(path: str, root: Path) -> str:
    """``path`` relative to ``root`` in POSIX form (``../x`` above it)."""
    return Path(os.path.relpath(os.path.realpath(path), os.path.realpath(root))).as_posix()


def inside(rel: str) -> bool:
    return rel != ".." and not rel.startswith("../")


def used_files(used: Mapping[str, Any] | None, root: Path) -> dict[str, str]:
    """The plugin's ``used`` record -> repository-relative path -> kind (``config``, ``module``, ``data``).
    Conftests and the configuration file count wherever they are; modules and data only in the
    repository and outside the installed environment."""
    used = used or {}
    env_dirs = environment.prefixes()
    kinds: dict[str, str] = {}

    def add(path: str, kind: str) -> None:
        full = os.path.realpath(path)
        if environment.in_environment(full, env_dirs) and kind != "config":
            return
        rel = relative(full, root)
        if kind != "config" and not inside(rel):
            return
        if os.path.basename(full) == "conftest.py":
            kind = "config"
        kinds.setdefault(rel, kind)

    ini = used.get("inifile")
    if ini:
        rel = relative(ini, root)
        name = os.path.basename(rel)
        kinds[f"{rel}::[{CONFIG_SECTIONS[name]}]" if name in CONFIG_SECTIONS else rel] = "config"
    for path in used.get("conftests", []):
        add(path, "config")
    for path in used.get("modules", []):
        if os.path.isfile(path):  # a module object may carry a made-up __file__ (torch's op namespaces)
            add(path, "module")
    for path in used.get("opened", []):
        add(path, "data")
    return kinds


def is_target(rel: str, targets: Iterable[str]) -> bool:
    """Whether ``rel`` is one of ``targets`` or lies in a target folder."""
    return any(rel == t or rel.startswith(t.rstrip("/") + "/") for t in targets)


def pins(kinds: Mapping[str, str], root: Path, known: Iterable[str], targets: Sequence[str]) -> list[FrozenFile]:
    """The files to pin at freeze: every used file neither ``known`` (pinned already) nor a target."""
    from ascendopt.contract.frozen import config_bytes, sha256_bytes

    known = set(known)
    entries = []
    for rel, kind in sorted(kinds.items()):
        if rel in known or is_target(rel, targets):
            continue
        data = config_bytes(root, rel) if kind == "config" else _read(root / rel)
        if data is not None:
            entries.append(FrozenFile(path=rel, role=ROLE[kind], sha256=sha256_bytes(data)))
    return entries


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def newcomers(kinds: Mapping[str, str], pinned: Iterable[str], targets: Sequence[str]) -> list[tuple[str, str]]:
    """``(path, message)`` for every file the run used that freeze neither pinned nor declared a target."""
    pinned = set(pinned)
    what = {"config": "pytest configuration (a conftest or the configuration file pytest read)",
            "module": "a module the tests imported", "data": "a file the tests opened"}
    return [(rel, f"{rel}: {what[kind]} takes part in the test run since freeze (not pinned, not a target); "
                  "remove it, or re-freeze")
            for rel, kind in sorted(kinds.items())
            if rel not in pinned and not is_target(rel, targets)]


# -- the default targets: what workload() imports from the repository --------------------------------

def repository_files(files: Iterable[str], root: Path) -> list[str]:
    """The repository files (relative to ``root``) among ``files`` (absolute paths: the modules a workload
    worker loaded, ``interleave._Child.modules``), leaving out the installed environment's and conftests."""
    env_dirs = environment.prefixes()
    rels = [relative(f, root) for f in files
            if os.path.isfile(f) and not environment.in_environment(os.path.realpath(f), env_dirs)]
    return sorted(r for r in set(rels) if inside(r) and os.path.basename(r) != "conftest.py")
