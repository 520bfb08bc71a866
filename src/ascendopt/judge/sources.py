"""The code of a tree under test runs from its source files, never from cached byte code.

CPython loads ``__pycache__/NAME.TAG.pyc`` instead of ``NAME.py`` when the cache file's header matches the
source's modification time and size, and pytest does the same with the assertion-rewritten byte code of test
files and conftests (``NAME.TAG-pytest-VERSION.pyc``). Anyone who can write the folder can forge that header,
so a pinned test file, a pinned helper or reference, or the target code could verify by digest while other
code runs, and a kept round's snapshot would not be the code that was measured.

In every child that loads code of a tree under test (the frozen test run, ``judge.pytest_launch``; the judge's
workers, ``judge.worker``), ``load_from_source(roots)`` runs before any file of those trees can be imported:

* ``SourceFileLoader.get_code`` (what every finder's source loader, an editable install's finder and
  ``importlib.util.spec_from_file_location`` use) compiles a file under a root, and a ``conftest.py``
  anywhere, from its source and never
  reads or writes its cached byte code; files elsewhere (the installed environment) load as usual;
* pytest's reader of rewritten byte code (``_pytest.assertion.rewrite._read_pyc``), when pytest is loaded,
  answers "no cache" for a file under a root, so pytest rewrites the test file from its source;
* both record the sha256 of the exact bytes they compiled (``loaded()``): the parent compares those of the
  pinned files with their pins, so a pinned file changed only while the tests imported it, and changed back
  after, is seen too.

``replaced()`` names those of the two that are no longer the harness's functions; a child reports a
replaced one (the code under test undid the defence) as an integrity failure. This module imports nothing of ascendopt.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable
from importlib.machinery import SourceFileLoader
from pathlib import Path

_ROOTS: tuple[str, ...] = ()
_INSTALLED: dict[str, object] = {}  # what the harness put in place: name -> function
_LOADED: dict[str, str] = {}  # real path -> sha256 of the exact bytes compiled


def _compiled(path: object, data: bytes) -> bytes:
    _LOADED[os.path.realpath(os.fspath(path))] = hashlib.sha256(data).hexdigest()
    return data


def _under_roots(path: object) -> bool:
    """Whether ``path`` is a file of a tree under test, or a conftest wherever it is (pytest loads those above
    the repository too, and the frozen run pins them)."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    full = os.path.realpath(os.fspath(path))
    return os.path.basename(full) == "conftest.py" or any(full.startswith(root) for root in _ROOTS)


# The judge's own code and the test runner: loaded from their source in the judge's children too, so that byte code
# planted in the installed environment (a ``.pyc`` stamped with a harness file's modification time and size) never
# runs in their place. Third-party libraries the workload uses (torch) keep their byte code: compiling them from
# source would cost seconds per child.
HARNESS_PACKAGES = ("ascendopt", "_pytest", "pytest", "pluggy")


def harness_roots(names: Iterable[str] = HARNESS_PACKAGES) -> list[str]:
    """The folders of ``names`` as installed (found without importing them): the roots to load from source."""
    import importlib.util

    roots = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            roots += list(spec.submodule_search_locations)
    return roots


def load_from_source(roots: Iterable[str | os.PathLike]) -> None:
    """From now on, files under ``roots`` (folders) load from their source in this process. Idempotent:
    a second call adds roots."""
    global _ROOTS
    _ROOTS = tuple(sorted({*_ROOTS, *(os.path.realpath(os.fspath(r)).rstrip(os.sep) + os.sep for r in roots)}))
    if "get_code" not in _INSTALLED:
        cached_get_code = SourceFileLoader.get_code

        def get_code(self, fullname):
            path = self.get_filename(fullname)
            if _under_roots(path):
                return self.source_to_code(_compiled(path, self.get_data(path)), path)
            return cached_get_code(self, fullname)

        SourceFileLoader.get_code = get_code
        _INSTALLED["get_code"] = get_code
    rewrite = sys.modules.get("_pytest.assertion.rewrite")
    if rewrite is not None and "_read_pyc" not in _INSTALLED:
        cached_read = rewrite._read_pyc

        def _read_pyc(source, pyc, *args, **kwargs):
            if _under_roots(source):
                return None
            return cached_read(source, pyc, *args, **kwargs)

        rewrite._read_pyc = _read_pyc
        _INSTALLED["_read_pyc"] = _read_pyc
        cached_rewrite = rewrite._rewrite_test

        def _rewrite_test(fn, config):
            if not _under_roots(fn):
                return cached_rewrite(fn, config)
            data = _compiled(fn, Path(fn).read_bytes())

            class _Read(type(Path(fn))):  # pytest reads the file once more: it gets the bytes just hashed
                def read_bytes(self) -> bytes:
                    return data

            return cached_rewrite(_Read(fn), config)

        rewrite._rewrite_test = _rewrite_test
        _INSTALLED["_rewrite_test"] = _rewrite_test


def replaced() -> list[str]:
    """The harness's functions that are no longer in place (empty: the defence holds)."""
    replaced = []
    if "get_code" in _INSTALLED and SourceFileLoader.__dict__.get("get_code") is not _INSTALLED["get_code"]:
        replaced.append("importlib.machinery.SourceFileLoader.get_code")
    rewrite = sys.modules.get("_pytest.assertion.rewrite")
    for name in ("_read_pyc", "_rewrite_test"):
        if name in _INSTALLED and getattr(rewrite, name, None) is not _INSTALLED[name]:
            replaced.append(f"_pytest.assertion.rewrite.{name}")
    return replaced


def loaded() -> dict[str, str]:
    """Every file compiled from source so far: real path -> sha256 of the bytes compiled (what ran, even when
    the file was changed back afterwards)."""
    return dict(_LOADED)
