"""Small own-code repositories for tests: files written, committed with git, frozen, and copied per test.

The repositories stand for a user's project: an op, its frozen test and a workload file defining
``workload()``. Freezing once per module and copying the frozen tree into each test keeps the tests fast
(freeze runs the tests, the workload and a profile) while each test edits its own copy.
"""

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

# op.py whose my_op sleeps DELAY_S: a workload whose speed a test sets by editing one number
SLEEP_OP = "import time\n\nDELAY_S = {delay}\n\n\ndef my_op(x):\n    time.sleep(DELAY_S)\n    return x * 2\n"
DOUBLES_TEST = "from op import my_op\n\n\ndef test_doubles():\n    assert my_op(2) == 4\n"
PROFILED_BENCH = textwrap.dedent("""\
    import torch
    from op import my_op


    def workload():
        with torch.profiler.record_function("my_op_kernel"):
            my_op(3)
    """)


def logged_bench(log: Path) -> str:
    """``PROFILED_BENCH`` whose module code appends the folder it runs from to ``log`` (a file outside the
    repository): one line per process that loaded the workload."""
    return ("import os\n\n" + f"with open({str(log)!r}, 'a') as _log:\n"
            "    _log.write(os.path.dirname(os.path.realpath(__file__)) + '\\n')\n" + PROFILED_BENCH)


def sleep_repo_files(delay_s: float = 0.004) -> dict[str, str]:
    """op.py (sleeping ``delay_s`` seconds a call), tests/test_op.py and bench.py (kernel my_op_kernel)."""
    return {"op.py": SLEEP_OP.format(delay=delay_s), "tests/test_op.py": DOUBLES_TEST, "bench.py": PROFILED_BENCH}


def git(root: Path, *args: str) -> None:
    """``git args`` in ``root`` with a fixed identity (test machines may have none configured)."""
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


def head(root: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True,
                          text=True).stdout.strip()


def commit_repo(root: Path, files: dict[str, str], message: str = "baseline") -> Path:
    """Write ``files`` (relative path -> text) under ``root``, ``git init`` and commit them all."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", message)
    return root


def freeze_in(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``ascendopt freeze ARGS`` run in ``root`` on the cpu backend (the CLI in this process)."""
    from conftest import run_cli

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASCENDOPT_BACKEND", "cpu")
        for key, value in (env or {}).items():
            mp.setenv(key, value)
        mp.chdir(root)
        return run_cli("freeze", *args)


def frozen_own_repo(root: Path, files: dict[str, str]) -> Path:
    """``files`` committed as a repository at ``root`` and frozen with its test and workload (``bench.py``,
    ``tests/test_op.py``, kernel filter ``my_op_kernel``); the freeze must succeed."""
    commit_repo(root, files)
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py",
                             "--kernel-filter", "my_op_kernel")
    assert code == 0, err
    return root


def working_copy(frozen: Path, tmp_path: Path, monkeypatch) -> Path:
    """A copy of the frozen repository ``frozen`` for one test, made the current directory."""
    copy = tmp_path / "repo"
    shutil.copytree(frozen, copy, symlinks=True)
    monkeypatch.chdir(copy)
    return copy


def frozen_kernel_workspace(tmp_path: Path, monkeypatch, **freeze):
    """A workspace frozen on the tests' tiny bundled kernels (``_gate_kernels``) with ``freeze`` arguments."""
    import _gate_kernels as gk
    from ascendopt.freeze.task import freeze_kernel
    from ascendopt.workspace import Workspace

    gk.install(monkeypatch)
    ws = Workspace(tmp_path / ".ascendopt")
    freeze_kernel(ws, **freeze)
    return ws


def kernel_round(ws, sets, hypothesis: str = "vector-bound: drop the planted extra pass"):
    """One recorded round on a ``frozen_kernel_workspace``, timed by the virtual clock; its record."""
    import _gate_kernels as gk
    from ascendopt.rounds import run as round_run

    return round_run.run_round(ws, hypothesis=hypothesis, sets=sets, pairs=12, reprofile=False,
                               timer=gk.virtual_clock).record


def plant_bytecode(source: Path, code: str, pytest_rewritten: bool = False) -> Path:
    """Write a cached byte code file for ``source`` that CPython (or, for ``pytest_rewritten``, the installed
    pytest's assertion rewriter) takes for it, whose body is ``code`` compiled. CPython's format: magic, flags
    0, ``source``'s modification time and size. pytest's rewriter reads that form or the hash-based one (flags
    3, ``importlib.util.source_hash`` of the source), depending on its version: the form it accepts is written,
    checked with its own reader. Returns the planted file's path."""
    import importlib.util
    import marshal
    import struct
    import sys

    import pytest as _pytest
    from _pytest.assertion.rewrite import _read_pyc

    stat = source.stat()
    tag = sys.implementation.cache_tag + (f"-pytest-{_pytest.__version__}" if pytest_rewritten else "")
    pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
    pyc.parent.mkdir(exist_ok=True)
    body = marshal.dumps(compile(code, str(source), "exec"))
    stamped = struct.pack("<LLL", 0, int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size & 0xFFFFFFFF)
    pyc.write_bytes(importlib.util.MAGIC_NUMBER + stamped + body)
    if pytest_rewritten and _read_pyc(source, pyc) is None:
        hashed = struct.pack("<L", 3) + importlib.util.source_hash(source.read_bytes())
        pyc.write_bytes(importlib.util.MAGIC_NUMBER + hashed + body)
        assert _read_pyc(source, pyc) is not None, "the installed pytest reads neither form"
    return pyc


def on_another_runner(monkeypatch) -> None:
    """Make the gate take this environment for another than freeze's (a CI runner's): what freeze recorded of its
    own environment (start-up files, pinned variables) is then not compared, and the checks that hold on any
    runner are what a test sees."""
    from ascendopt.judge import environment

    monkeypatch.setattr(environment, "identity", lambda: "another-runner")


# bench.py whose inputs(seed, shape) makes one fp32 [rows, cols] tensor of any shape of a mix (64 x 64 by default)
SHAPED_BENCH = textwrap.dedent("""\
    import torch
    from op import my_op


    def inputs(seed, shape=None):
        rows, cols = shape[0] if shape is not None else (64, 64)
        return (torch.randn(rows, cols),)


    def workload(x):
        with torch.profiler.record_function("my_op_kernel"):
            return my_op(x)
    """)


def two_bucket_mix(small_weight: float) -> str:
    """A hand-written mix (``freeze --shapes-file``) of a 16-row bucket of ``small_weight`` and a 256-row one."""
    return (f"kernel: my_op_kernel\nbuckets:\n  - {{shapes: [[16, 64]], dtypes: [fp32], weight: {small_weight}}}\n"
            f"  - {{shapes: [[256, 64]], dtypes: [fp32], weight: {round(1 - small_weight, 6)}}}\n")


def frozen_shaped_repo(root: Path, op: str, test: str, small_weight: float, *freeze_args: str) -> Path:
    """``op.py``, ``SHAPED_BENCH``, ``tests/test_op.py`` and ``two_bucket_mix(small_weight)`` committed at ``root``
    and frozen with the mix (``--shapes-file``) and ``freeze_args``; the freeze must succeed."""
    commit_repo(root, {"op.py": op, "bench.py": SHAPED_BENCH, "tests/test_op.py": test,
                       "mix.yaml": two_bucket_mix(small_weight)})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_op_kernel", "--shapes-file", "mix.yaml", "--no-profile", "--no-precheck",
                             *freeze_args)
    assert code == 0, err
    return root
