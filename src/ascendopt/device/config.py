"""Access to the YAML files under ``configs/`` (chips and classification rules)."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

from ascendopt.errors import UsageError


def config_dir() -> Path:
    """``$ASCENDOPT_CONFIG_DIR`` if set, else the ``configs/`` shipped with the package."""
    env = os.environ.get("ASCENDOPT_CONFIG_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / "configs"


def load_config(name: str) -> dict[str, Any]:
    """Load ``configs/<name>.yaml`` of the current ``config_dir()`` as a dict; errors name the file.

    Cached per folder, so a process that changes ``$ASCENDOPT_CONFIG_DIR`` reads the new folder's files.
    """
    return _load_config(config_dir(), name)


@cache
def _load_config(folder: Path, name: str) -> dict[str, Any]:
    import yaml

    path = folder / f"{name}.yaml"
    try:
        # libyaml's loader when PyYAML has it: the pure-Python one takes ~0.2 s of CPU on rules.yaml, a
        # noticeable part of a whole `analyze` run; both build the same safe types
        data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except FileNotFoundError:
        raise UsageError(f"{path}: config file not found") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping at the top level")
    return data


def chips() -> dict[str, dict[str, Any]]:
    return load_config("chips")["chips"]


def chip_key(name: str) -> str:
    """The configs/chips.yaml key for a chip name or alias.

    Accepts the exact key (``Ascend910B2``), any letter case, the name without its ``Ascend`` prefix
    (``910B2``) and device names with a suffix (``Ascend910B2C``: the longest key it starts with).
    Unknown names raise with the list of known chips.
    """
    table = chips()
    wanted = str(name).strip().lower()
    known = ", ".join(sorted(table))
    if not wanted:
        raise UsageError("chip name is empty", hint=f"known chips: {known}")
    candidates = [wanted, "ascend" + wanted]
    match = next((key for c in candidates for key in table if key.lower() == c), None)
    if match is None:
        prefixed = {key for c in candidates for key in table if c.startswith(key.lower())}
        match = max(prefixed, key=len) if prefixed else None
    if match is None:
        raise UsageError(f"unknown chip {name!r}", hint=f"known chips: {known}")
    return match


CHIP_ENV = "ASCENDOPT_CHIP"


def user_chip() -> str | None:
    """The chip the user names in ``$ASCENDOPT_CHIP`` as its configs/chips.yaml key; None when unset.

    The one check of that variable (``chip_key``, as for ``--chip``): a name chips.yaml does not know is a
    ``UsageError`` (exit 2) naming the variable and listing the known chips, never taken as it is.
    """
    name = os.environ.get(CHIP_ENV)
    if name is None or not name.strip():
        return None
    try:
        return chip_key(name)
    except UsageError as exc:
        raise UsageError(f"{CHIP_ENV}={name!r}: {exc.message}", hint=f"{exc.hint}; or unset {CHIP_ENV}") from None


def chip_facts(name: str) -> dict[str, Any]:
    """Facts for one chip (name or alias, see ``chip_key``)."""
    return chips()[chip_key(name)]


def default_model_chip() -> str:
    return str(load_config("chips").get("default_model_chip", "Ascend910B2"))
