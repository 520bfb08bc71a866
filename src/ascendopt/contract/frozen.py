"""Frozen scope: files and oracle sources pinned by sha256, the project root, the git state.

Paths of frozen files are stored relative to the project root (the git top level of the current
directory, else the current directory) so a contract stays valid in another checkout of the same
repository, e.g. on a CI runner.

For a bundled kernel the frozen scope is the oracle and the input factory: the sources of
``spec.reference`` and ``spec.make_inputs`` (``role: oracle``, path ``module:qualname``). The kernel
itself is what the loop optimizes and is not frozen.
"""

from __future__ import annotations

import hashlib
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

from ascendopt.contract.model import Contract, FrozenFile
from ascendopt.errors import UsageError


def project_root(start: Path | None = None) -> Path:
    """The git top level containing ``start`` (default: the current directory), else ``start``."""
    start = Path(start or Path.cwd()).resolve()
    proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=start, capture_output=True, text=True)
    return Path(proc.stdout.strip()).resolve() if proc.returncode == 0 else start


def git_state(root: Path) -> dict[str, Any]:
    """``{"commit": HEAD sha or None, "dirty": bool}`` of the repository at ``root``."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    if head.returncode != 0:
        return {"commit": None, "dirty": False}
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                            capture_output=True, text=True)
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_entry(path: str | Path, role: str, root: Path) -> FrozenFile:
    """Pin one file; it must exist and lie inside the project root."""
    p = Path(path)
    full = (p if p.is_absolute() else Path.cwd() / p).resolve()
    if not full.is_file():
        raise UsageError(f"{path}: file not found", hint=f"the {role} file must exist to be frozen")
    try:
        rel = full.relative_to(root)
    except ValueError:
        raise UsageError(f"{path}: outside the project root {root}",
                         hint="frozen files must live in the repository being optimized") from None
    return FrozenFile(path=rel.as_posix(), role=role, sha256=sha256_bytes(full.read_bytes()))


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
        full = root / frozen.path
        if not full.is_file():
            results.append((frozen.path, False, f"{frozen.path}: frozen {frozen.role} file is missing"))
        elif sha256_bytes(full.read_bytes()) != frozen.sha256:
            results.append((frozen.path, False, f"{frozen.path}: frozen {frozen.role} file changed since freeze "
                            "(sha256 mismatch); restore it (a test believed wrong is a separate change)"))
        else:
            results.append((frozen.path, True, "unchanged"))
    return results


def resolve_command(argv: tuple[str, ...] | list[str]) -> list[str]:
    """A stored command with a leading ``python`` run by this interpreter (the same environment)."""
    argv = list(argv)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv
