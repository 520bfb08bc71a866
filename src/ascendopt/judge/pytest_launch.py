"""Start the frozen pytest run so that the runner is the environment's, never a file of the repository.

``python -m ascendopt.judge.pytest_launch ROOT ARGS...`` with ``PYTHONSAFEPATH=1`` in the environment
(``ascendopt.judge.testset`` starts it so): neither the working directory nor the script's folder is on
``sys.path``, so ``pytest``, ``_pytest`` and ``pluggy`` import from the installed environment even when
the repository holds a ``pytest.py``, a ``pytest/`` package or a ``pluggy.py``. Then the reporting plugin
(``ascendopt.judge.pytest_report``) is imported, which reads the run's key, adds its audit hook and binds
the comparison functions, and the import system loads every file under ``ROOT`` from its source, never from
cached byte code (``judge.sources``), all before a file of the repository can be imported. Only then is ``ROOT``
put first on ``sys.path``, as ``python -m pytest`` would put the working directory, and pytest runs
with ``ARGS``. The plugin's report names where the runner was imported from; the parent checks it.

``PYTHONSAFEPATH`` stays set for the whole run: it also keeps pytest-xdist's worker processes
(``python -c`` in the repository) from importing a ``pytest.py`` of the working directory, and the
tests' own Python children run with it too.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    root, args = argv[0], argv[1:]
    from ascendopt.judge import sources

    # the repository's files, the test runner's and the judge's own load from their source, never a planted .pyc
    sources.load_from_source([root, *sources.harness_roots()])
    import _pytest  # noqa: F401 - imported now, from the environment: the repository is not on sys.path yet
    import pluggy  # noqa: F401
    import pytest

    sources.load_from_source([root])  # again, now that pytest's assertion rewriter is there to be covered
    from ascendopt.judge import pytest_report  # noqa: F401 - key, audit hook and comparisons, before any test code

    sys.path.insert(0, root)
    sys.argv = ["pytest", *args]
    code = pytest.main(args)
    sys.stdout.flush()
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
