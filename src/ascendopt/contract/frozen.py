"""Frozen scope: files and oracle sources pinned by sha256, the project root, the git state.

Paths of frozen files are stored relative to the project root (the git top level of the current
directory, else the current directory) so a contract stays valid in another checkout of the same
repository, e.g. on a CI runner.

For a bundled kernel the frozen scope is the oracle and the input factory: the sources of
``spec.reference`` and ``spec.make_inputs`` (``role: oracle``, path ``module:qualname``). The kernel
itself is what the loop optimizes and is not frozen.

For own code the pytest configuration that takes part in running the frozen tests is frozen too
(``role: test-config``): in every folder from each test file's folder up to the project root, a
``conftest.py``, ``pytest.ini`` / ``.pytest.ini``, and the pytest section of ``pyproject.toml``
(``[tool.pytest]`` with its sub-tables such as ``[tool.pytest.ini_options]``), ``tox.ini``
(``[pytest]``) and ``setup.cfg`` (``[tool:pytest]``); also a file the command names with ``-c``.
A section is pinned as ``file::[section]`` with the sha256 of its text only, so an unrelated edit
elsewhere in the file is not a change. Such a file that appears after freeze is reported too: a new
``conftest.py`` can skip or deselect every test without touching a frozen file.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ascendopt.contract.model import Contract, FrozenFile
from ascendopt.errors import UsageError


def project_root(start: Path | None = None) -> Path:
    """The git top level containing ``start`` (default: the current directory), else ``start``
    (``vcs.toplevel``: never where a repository's ``core.worktree`` points)."""
    from ascendopt import vcs

    start = Path(start or Path.cwd()).resolve()
    return vcs.toplevel(start) or start


def git_state(root: Path) -> dict[str, Any]:
    """``{"commit": HEAD sha or None, "dirty": bool, "tree": tree id, "tree_digest": content digest}`` of the
    repository at ``root`` (``vcs.commit_state``: read from the objects and the disk, not the index)."""
    from ascendopt import vcs

    return vcs.commit_state(root)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_entry(path: str | Path, role: str, root: Path) -> FrozenFile:
    """Pin one file; it must exist and lie inside the project root."""
    p = Path(path)
    full = (p if p.is_absolute() else Path.cwd() / p).resolve()
    if full.is_dir():
        raise UsageError(f"{path}: a folder, not a file", hint=f"give the {role} file itself")
    if not full.is_file():
        raise UsageError(f"{path}: file not found", hint=f"the {role} file must exist to be frozen")
    try:
        rel = full.relative_to(root)
    except ValueError:
        raise UsageError(f"{path}: outside the project root {root}",
                         hint="frozen files must live in the repository being optimized") from None
    return FrozenFile(path=rel.as_posix(), role=role, sha256=sha256_bytes(full.read_bytes()))


# pytest configuration: files read whole, and files of which pytest reads one section (file -> header)
PYTEST_CONFIG_FILES = ("conftest.py", "pytest.ini", ".pytest.ini")
PYTEST_CONFIG_SECTIONS = {"pyproject.toml": "tool.pytest", "tox.ini": "pytest", "setup.cfg": "tool:pytest"}
_SECTION = re.compile(r"^(?P<file>.+)::\[(?P<section>[^\]]+)\]$")  # a pinned section: "pyproject.toml::[tool.pytest]"
_HEADER = re.compile(r"^\s*\[\[?\s*(?P<name>[^\[\]]+?)\s*\]\]?\s*(?:[#;].*)?$")  # [name] or TOML [[name]]


def pytest_args(argv: Sequence[str]) -> list[str] | None:
    """The arguments given to pytest when ``argv`` runs it (``pytest ...``, ``py.test ...``,
    ``python -m pytest ...``), else None (another test command)."""
    argv = list(argv)
    if not argv:
        return None
    name = Path(argv[0]).name
    if name in ("pytest", "py.test"):
        return argv[1:]
    if (re.fullmatch(r"python[0-9.]*", name) or argv[0] == sys.executable) and argv[1:3] == ["-m", "pytest"]:
        return argv[3:]
    return None


def section_text(text: str, section: str) -> str | None:
    """The lines of the ``[section]`` table and of its sub-tables ``[section.*]`` (TOML), headers
    included, or None when the text has no such table."""
    lines, inside, found = [], False, False
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            name = header.group("name")
            inside = name == section or name.startswith(section + ".")
            found = found or inside
        if inside:
            lines.append(line)
    return "\n".join(lines) if found else None


def config_bytes(root: Path, path: str) -> bytes | None:
    """What is pinned for a test-config ``path``: the file, or for ``file::[section]`` the section's
    text; None when the file or the section is absent."""
    match = _SECTION.match(path)
    full = root / (match.group("file") if match else path)
    if not full.is_file():
        return None
    if not match:
        return full.read_bytes()
    text = section_text(full.read_text(encoding="utf-8", errors="replace"), match.group("section"))
    return None if text is None else text.encode()


def pytest_config_entries(tests: Sequence[str], root: Path, argv: Sequence[str] = ()) -> list[FrozenFile]:
    """The pytest configuration (``role: test-config``) on the paths of the test files ``tests``
    (relative to ``root``): see the module docstring. ``argv``: the test command, for a ``-c FILE``."""
    folders: list[Path] = []
    for test in tests:
        folder = (root / test).parent
        while folder not in folders:
            folders.append(folder)
            if folder == root or root not in folder.parents:
                break
            folder = folder.parent
    paths = []
    for folder in folders:
        rel = folder.relative_to(root).as_posix() if folder != root else ""
        prefix = f"{rel}/" if rel else ""
        paths += [prefix + name for name in PYTEST_CONFIG_FILES]
        paths += [f"{prefix}{name}::[{section}]" for name, section in PYTEST_CONFIG_SECTIONS.items()]
    args = pytest_args(argv) or []
    for i, arg in enumerate(args):
        named = args[i + 1] if arg in ("-c", "--config-file") and i + 1 < len(args) else \
            arg.split("=", 1)[1] if arg.startswith("--config-file=") else None
        if named:
            full = (root / named).resolve()
            if root in full.parents:
                paths.append(full.relative_to(root).as_posix())
    entries = []
    for path in dict.fromkeys(paths):
        data = config_bytes(root, path)
        if data is not None:
            entries.append(FrozenFile(path=path, role="test-config", sha256=sha256_bytes(data)))
    return entries


def oracle_entries(spec) -> list[FrozenFile]:
    """The sources of a bundled kernel's reference and input factory."""
    return [FrozenFile(path=f"{fn.__module__}:{fn.__qualname__}", role="oracle",
                       sha256=sha256_bytes(inspect.getsource(fn).encode()))
            for fn in (spec.reference, spec.make_inputs)]


def check_frozen_files(contract: Contract, root: Path) -> list[tuple[str, bool, str]]:
    """``(name, ok, message)`` per frozen item; a missing or changed item is not ok."""
    results = []
    current_oracles: dict[str, str] = {}
    if contract.is_kernel:
        from ascendopt import kernels

        current_oracles = {f.path: f.sha256 for f in oracle_entries(kernels.get(contract.workload.kernel))}
    for frozen in contract.frozen_files:
        if frozen.role == "oracle":
            now = current_oracles.get(frozen.path)
            if now is None:
                results.append((frozen.path, False, f"{frozen.path}: no longer the kernel's oracle/input factory "
                                f"(now {', '.join(current_oracles)}); frozen scope changed"))
            elif now != frozen.sha256:
                results.append((frozen.path, False, f"{frozen.path}: source changed since freeze (sha256 mismatch)"))
            else:
                results.append((frozen.path, True, "unchanged"))
            continue
        if frozen.role == "test-config":
            data = config_bytes(root, frozen.path)
        else:
            data = (root / frozen.path).read_bytes() if (root / frozen.path).is_file() else None
        if data is None:
            results.append((frozen.path, False, f"{frozen.path}: frozen {frozen.role} file is missing"))
        elif sha256_bytes(data) != frozen.sha256:
            results.append((frozen.path, False, f"{frozen.path}: frozen {frozen.role} file changed since freeze "
                            "(sha256 mismatch); restore it (a test believed wrong is a separate change)"))
        else:
            results.append((frozen.path, True, "unchanged"))
    if not contract.is_kernel:
        pinned = {f.path for f in contract.frozen_files}
        tests = [f.path for f in contract.frozen_files if f.role == "test"]
        for entry in pytest_config_entries(tests, root, contract.commands.get("validation", ())):
            if entry.path not in pinned:
                results.append((entry.path, False, f"{entry.path}: pytest configuration on the frozen tests' paths "
                                "added since freeze (it can skip or deselect tests); remove it, or re-freeze"))
    return results


def resolve_command(argv: tuple[str, ...] | list[str]) -> list[str]:
    """A stored command with a leading ``python`` run by this interpreter (the same environment)."""
    argv = list(argv)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv
