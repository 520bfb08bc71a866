"""Safe names for profile folders: no path separators, no traversal, nothing a shell would expand."""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path

from ascendopt.errors import UsageError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 64


def sanitize_name(name: str) -> str:
    """Keep ``[A-Za-z0-9._-]``, replace runs of anything else by ``_``, drop leading dots/dashes.

    ``"../../etc"`` -> ``"etc"`` after stripping, ``"my op;rm -rf"`` -> ``"my_op_rm_-rf"``. An
    empty result is a UsageError (the name would otherwise be invisible or a path component).
    """
    cleaned = _UNSAFE.sub("_", str(name)).lstrip("._-")
    cleaned = cleaned.replace("..", "_")[:MAX_NAME].rstrip(".")
    if not cleaned:
        raise UsageError(f"--name {name!r}: no usable characters", hint="use letters, digits, '.', '_' or '-'")
    return cleaned


def new_set_id() -> str:
    """Shared by every run of one ``collect --aic-metrics A,B`` invocation."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def profile_folder(roots: list[Path], name: str, backend: str) -> Path:
    """``<roots[0]>/<name>_<YYYYmmdd-HHMMSS>_ascendopt_<backend>``, a name free in every root.

    ``roots`` are the staging folder (where it is created) and the final out_dir (where it will be
    renamed to). A clash within the same second (two metric groups of a fast run) takes the next
    free second, so names keep the exact pattern readers parse and still sort in run order.
    """
    now = time.time()
    for offset in range(3600):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + offset))
        leaf = f"{name}_{stamp}_ascendopt_{backend}"
        if not any((root / leaf).exists() for root in roots):
            return roots[0] / leaf
    raise UsageError(f"{roots[-1]}: no free profile folder name for {name!r} within the next hour")
