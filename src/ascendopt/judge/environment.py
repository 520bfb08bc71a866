"""The installed environment the judge's children start from: checked, not trusted blindly.

The frozen tests, the workers and the profiles run on this interpreter (``sys.executable``), with its
installed packages and the start-up files it runs before any of ascendopt's code: the ``*.pth`` files of its
site directories and a ``sitecustomize``/``usercustomize`` module there. Code under test runs as the same
user and could write there, so that a later test run loads a patched comparison, a patched pytest or a
start-up hook. Three checks stand against that:

* **Installed files against their distribution** (``installed_problems``): every file of the environment the
  frozen test run or the working tree's worker imported, and every file of ascendopt, must have the digest its
  distribution's ``RECORD`` gives (what pip or uv
  installed). A file that already differed at freeze (a package patched by hand) is pinned then, by
  distribution and path (``Contract.environment["modified"]``), so the pin holds on another machine too.
* **Start-up files across the command** (``Startup``): taken when the command starts and again when its last
  child has ended; a file added, changed or removed in between is exit 3, and so is a file of ascendopt that
  is then not what its distribution installed (``after_command``).
* **Start-up files since freeze**: freeze records them with the environment's identity (a digest of the host
  name and ``sys.prefix``). A gate in the same environment requires the same files with the same content, so
  one planted between two commands is seen. In another environment (a CI runner's) only the two checks above
  apply: its start-up files are its own.

The installed files checked are those the frozen test run imported, those the working tree's worker imported,
and ascendopt's own. Not checked: other installed files, compiled byte code in the environment's
``__pycache__`` folders (the repository's is never read, ``judge.sources``),
files a distribution installed without a digest in its ``RECORD``, and the interpreter's own standard library.
"""

from __future__ import annotations

import base64
import hashlib
import os
import site
import socket
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

STARTUP_MODULES = ("sitecustomize.py", "usercustomize.py")
# The variables that change what the frozen test run or a worker loads before any of the judge's checks can run:
# a folder put on sys.path (whose sitecustomize Python then runs), pytest's extra arguments and plugins. Recorded
# at freeze; in that environment a gate requires the same values.
PINNED_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONNOUSERSITE",
                    "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")


def _sha256(path: str) -> str | None:
    """``workspace.sha256_file`` of ``path``; None when it cannot be read."""
    from ascendopt.workspace import sha256_file

    try:
        return sha256_file(Path(path))
    except OSError:
        return None


def site_dirs() -> list[str]:
    """This interpreter's site directories (real paths): its site-packages, and the user's when enabled."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    seen: dict[str, None] = {}
    for d in dirs:
        if os.path.isdir(d):
            seen.setdefault(os.path.realpath(d), None)
    return list(seen)


def identity() -> str:
    """Which environment this is: a digest of the host name and the real ``sys.prefix`` (no path is stored)."""
    text = f"{socket.gethostname()}\0{os.path.realpath(sys.prefix)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _label(path: str) -> str:
    """``path`` as the contract names it: relative to ``sys.prefix`` or the home folder when under them."""
    for base, mark in ((os.path.realpath(sys.prefix), ""), (os.path.realpath(os.path.expanduser("~")), "~/")):
        if path.startswith(base + os.sep):
            return mark + os.path.relpath(path, base)
    return path


def startup_files() -> dict[str, str]:
    """Every start-up file of the site directories (``*.pth``, ``sitecustomize.py``, ``usercustomize.py``):
    label -> sha256 ("" when it cannot be read)."""
    found: dict[str, str] = {}
    for folder in [*site_dirs(), *python_path()]:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if (name.endswith(".pth") or name in STARTUP_MODULES) and os.path.isfile(path):
                found[_label(path)] = _sha256(path) or ""
    return found


def python_path() -> list[str]:
    """The folders ``PYTHONPATH`` puts on ``sys.path`` (real paths, existing ones): the frozen test run sees them,
    and Python runs a ``sitecustomize``/``usercustomize`` it finds there at start-up."""
    return [os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.isdir(p)]


def variables() -> dict[str, str | None]:
    """The values of ``PINNED_VARIABLES`` now (None: not set)."""
    return {name: os.environ.get(name) for name in PINNED_VARIABLES}


def startup_changes(before: Mapping[str, str], after: Mapping[str, str], since: str) -> list[tuple[str, str]]:
    """``(label, message)`` for each start-up file added, changed or removed between ``before`` and
    ``after``; ``since`` says when ``before`` was taken ("freeze", "the command started")."""
    problems = []
    for label in sorted({*before, *after}):
        if before.get(label) == after.get(label):
            continue
        what = ("appeared" if label not in before else "disappeared" if label not in after else "changed")
        problems.append((label, f"{label}: a start-up file of the environment {what} since {since} (Python runs it "
                                "before any test); remove what wrote it, or reinstall, then re-freeze"))
    return problems


class Startup:
    """The start-up files taken when a command starts; ``changes()`` compares them with now."""

    def __init__(self):
        self.before = startup_files()

    def changes(self) -> list[tuple[str, str]]:
        return startup_changes(self.before, startup_files(), "the command started")


# -- installed files against their distribution's RECORD -------------------------------------------------


def installed_index(wanted: Iterable[str] | None = None) -> dict[str, tuple[str, str, str]]:
    """The files installed distributions list with a sha256 in their ``RECORD`` (only those in ``wanted``,
    real paths, when given): real path -> (distribution name, path in the RECORD, expected hex digest)."""
    import csv
    from importlib import metadata

    wanted = None if wanted is None else set(wanted)
    index: dict[str, tuple[str, str, str]] = {}
    for dist in metadata.distributions():
        try:
            text = dist.read_text("RECORD")
            if not text:
                continue
            base = os.path.realpath(str(dist.locate_file("")))
            name = dist.metadata["Name"] or "?"
        except Exception:  # noqa: BLE001 - a broken metadata folder is not ours to judge
            continue
        for row in csv.reader(text.splitlines()):
            if len(row) < 2 or not row[1].startswith("sha256="):
                continue
            full = os.path.join(base, row[0])
            if ".." in row[0]:
                full = os.path.normpath(full)
            if wanted is not None and full not in wanted:
                continue
            value = row[1][len("sha256="):]
            try:
                expected = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
            except ValueError:
                continue
            index.setdefault(full, (name, row[0], expected))
    return index


def prefixes() -> list[str]:
    """This interpreter's prefixes (real paths): its environment's folder and the base installation's."""
    return sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


def in_environment(path: str, dirs: Sequence[str] | None = None) -> bool:
    """Whether the real path ``path`` belongs to an installed environment: under one of ``dirs`` (default
    ``prefixes()``), or in a ``site-packages`` / ``dist-packages`` folder anywhere (a virtual environment kept
    inside the repository too). Such files are the environment's: checked against their RECORD here, never
    pinned as the repository's (``judge.scope``)."""
    parts = Path(path).parts
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    return any(path == d or path.startswith(d + os.sep) for d in (prefixes() if dirs is None else dirs))


def _environment_files(files: Iterable[str], root: Path) -> list[str]:
    """The existing files among ``files`` (real paths) that are the environment's or lie outside ``root``."""
    top = os.path.realpath(root) + os.sep
    dirs = prefixes()
    out = set()
    for path in files:
        full = os.path.realpath(path)
        if (not full.startswith(top) or in_environment(full, dirs)) and os.path.isfile(full):
            out.add(full)
    return sorted(out)


def installed_differences(files: Iterable[str], root: Path,
                          index: Mapping[str, tuple[str, str, str]] | None = None) -> dict[str, tuple[str, str]]:
    """The files among ``files`` (absolute; those outside ``root``, the repository) whose digest is not the
    one their distribution's RECORD gives: ``"DIST/PATH"`` -> (real path, digest now)."""
    candidates = _environment_files(files, root)
    candidates += [p for p in _startup_paths() if p not in candidates]
    index = installed_index(candidates) if index is None else index
    found = {}
    for path in candidates:
        known = index.get(path)
        if known is None:
            continue
        digest = _sha256(path)
        if digest != known[2]:
            found[f"{known[0]}/{known[1]}"] = (path, digest or "")
    return found


def harness_files() -> list[str]:
    """ascendopt's own Python files (its installed copy is checked like any package the verdict rests on)."""
    package = Path(__file__).resolve().parents[1]
    return sorted(str(p) for p in package.rglob("*.py"))


def _startup_paths() -> list[str]:
    paths = []
    for folder in site_dirs():
        try:
            paths += [os.path.join(folder, n) for n in sorted(os.listdir(folder))
                      if n.endswith(".pth") or n in STARTUP_MODULES]
        except OSError:
            continue
    return paths


def installed_problems(files: Iterable[str], root: Path, pinned: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(label, message)`` for each installed file the run imported (or start-up file) that differs from its
    distribution's RECORD and is not pinned with its digest now (``pinned``: ``Contract.environment
    ["modified"]``)."""
    problems = []
    for key, (path, digest) in sorted(installed_differences(files, root).items()):
        if pinned.get(key) == digest:
            continue
        problems.append((_label(path), f"{_label(path)}: this installed file is not what its distribution installed "
                                       f"({key.split('/')[0]}'s RECORD gives another digest), and the tests loaded "
                                       "it; reinstall the package, or re-freeze if you patched it on purpose"))
    return problems


# -- what freeze records, what the gate checks ----------------------------------------------------------


def record(used_modules: Iterable[str], root: Path) -> dict[str, Any]:
    """``Contract.environment`` at freeze: ``{"identity", "startup": {label: sha256}, "modified": {"DIST/PATH":
    sha256}, "variables": {name: value or None}}`` (``modified``: installed files among ``used_modules``, what the
    baseline's test run and worker imported and ascendopt's own, that already differ from their RECORD, pinned as
    they are; ``variables``: ``PINNED_VARIABLES``)."""
    modified = {key: digest for key, (_, digest) in installed_differences(used_modules, root).items()}
    return {"identity": identity(), "startup": startup_files(), "modified": dict(sorted(modified.items())),
            "variables": variables()}


def modified_pins(frozen: Mapping[str, Any] | None) -> Mapping[str, str]:
    """The installed files pinned as they were at freeze (``Contract.environment["modified"]``; none before it)."""
    return (frozen or {}).get("modified") or {}


def after_command(startup: Startup, root: Path, frozen: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """When a command's last child has ended: the start-up files changed since it started, and ascendopt's own
    files that are not what its distribution installed (written by a child, they would run in the next
    command's judge)."""
    return startup.changes() + installed_problems(harness_files(), root, modified_pins(frozen))


def since_freeze(frozen: Mapping[str, Any] | None, startup: Mapping[str, str]) -> list[tuple[str, str]]:
    """The start-up files changed since freeze, when this is the environment freeze ran in (else none)."""
    if not frozen or frozen.get("identity") != identity():
        return []
    problems = startup_changes(frozen.get("startup") or {}, startup, "freeze")
    pinned = frozen.get("variables")
    if isinstance(pinned, Mapping):  # contracts frozen before the variables were recorded have none
        now = variables()
        problems += [(name, f"{name}: {now.get(name)!r} in the environment, {pinned.get(name)!r} at freeze (it changes "
                            "what the test run loads before the judge's checks); restore it, or re-freeze")
                     for name in PINNED_VARIABLES if name in pinned and pinned.get(name) != now.get(name)]
    return problems
