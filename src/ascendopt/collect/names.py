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
    renamed to). A clash within the same second (two metric groups of a fast run) gets ``-2``,
    ``-3``... appended to the timestamp, keeping the ``_ascendopt_<backend>`` suffix readers glob.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    label, n = stamp, 2
    while any((root / f"{name}_{label}_ascendopt_{backend}").exists() for root in roots):
        label, n = f"{stamp}-{n}", n + 1
    return roots[0] / f"{name}_{label}_ascendopt_{backend}"
