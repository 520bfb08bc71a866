"""The installed environment the judge's children start from is checked, not trusted blindly
(``judge.environment``).

Code under test runs as the same user as the judge and can write into the installed environment: edit a
package the tests rely on, or add a start-up file that Python runs before any test. Each case here runs
ascendopt in a throwaway environment of its own (a venv in ``tmp_path`` that sees this interpreter's packages
through one start-up file, plus a small comparison package ``cmpkit`` installed with a ``RECORD`` as pip writes
it), so the attacks can write into it. The frozen test compares with ``cmpkit.close``; freeze runs with output
equivalence off, so a wrong op is caught by the tests or not at all.

Classes (published lists): KernelGuard's harness manipulation and the hacker-fixer papers' "environment
tampering" (the evaluator's dependencies are changed instead of the code), KernelBench's eval hacking through
a patched comparison, here reached through the environment rather than a monkeypatch in the test process.
Control: an unchanged environment stays green.
"""

import base64
import hashlib
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from _cli_json import json_payload
from _own_code import commit_repo

OP = "def my_op(x):\n    return x * 2\n"
WRONG = "def my_op(x):\n    return x * 3\n"
CMPKIT = "def close(a, b):\n    return bool((a - b).abs().max() <= 1e-6)\n"
WKIT = "import torch\n\n\ndef example():\n    return torch.ones(8)\n"  # only the workload imports it
TEST = textwrap.dedent("""\
    import torch
    from cmpkit import close

    from op import my_op


    def test_doubles():
        x = torch.arange(4.0)
        assert close(my_op(x), x + x)
    """)
BENCH = textwrap.dedent("""\
    import torch
    from op import my_op
    from wkit import example

    x = example()


    def workload():
        with torch.profiler.record_function("my_op_kernel"):
            return my_op(x)
    """)
FREEZE = ("--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter", "my_op_kernel",
          "--no-profile", "--no-precheck", "--no-equivalence")


def _record_line(rel: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def _make_env(where: Path) -> tuple[Path, Path]:
    """A venv at ``where`` whose one start-up file adds this interpreter's site folders, with ``cmpkit``
    installed as pip would (its files listed with digests in its RECORD) -> (python, site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True)
    python = where / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    ours = [p for p in site.getsitepackages() if os.path.isdir(p)]
    (purelib / "judge_env.pth").write_text("import site; " + "; ".join(f"site.addsitedir({p!r})" for p in ours)
                                           + "\n")
    _install(purelib, "cmpkit", CMPKIT)
    _install(purelib, "wkit", WKIT)
    return python, purelib


def _install(purelib: Path, name: str, source: str) -> None:
    """Package ``name`` (one ``__init__.py`` holding ``source``) installed into ``purelib`` as pip would."""
    (purelib / name).mkdir()
    (purelib / name / "__init__.py").write_text(source)
    info = purelib / f"{name}-1.0.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
    (info / "METADATA").write_bytes(metadata)
    (info / "RECORD").write_text("\n".join([_record_line(f"{name}/__init__.py", source.encode()),
                                            _record_line(f"{name}-1.0.dist-info/METADATA", metadata),
                                            f"{name}-1.0.dist-info/RECORD,,"]) + "\n")


def _ascendopt(python: Path, root: Path, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "ASCENDOPT_BACKEND": "cpu"}
    proc = subprocess.run([str(python), "-m", "ascendopt", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    """(python, site-packages, repository): the repository frozen with that environment's python."""
    base = tmp_path_factory.mktemp("environment")
    python, purelib = _make_env(base / "env")
    root = commit_repo(base / "repo", {"op.py": OP, "bench.py": BENCH, "tests/test_op.py": TEST})
    code, out, err = _ascendopt(python, root, "freeze", *FREEZE)
    assert code == 0, err[-3000:]
    return python, purelib, root


@pytest.fixture
def env(frozen):
    """The frozen setup, with the environment and op.py put back after the test."""
    python, purelib, root = frozen
    before = set(purelib.iterdir())
    yield python, purelib, root
    (purelib / "cmpkit" / "__init__.py").write_text(CMPKIT)
    (purelib / "wkit" / "__init__.py").write_text(WKIT)
    for path in set(purelib.iterdir()) - before:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    (root / "op.py").write_text(OP)


def _gate(python: Path, root: Path) -> tuple[int, dict, str]:
    code, out, err = _ascendopt(python, root, "gate", "--skip-perf", "--json")
    return code, json_payload(out), err


def _failed(result: dict) -> dict[str, str]:
    return {c["name"]: c["message"] for s in result["stages"] for c in s["checks"] if not c["passed"]}


def test_control_an_unchanged_environment_stays_green_and_freeze_recorded_it(env):
    python, purelib, root = env
    code, result, err = _gate(python, root)
    assert code == 0, err[-3000:]
    contract = (root / ".ascendopt" / "contract.yaml").read_text()
    assert "environment:" in contract and "judge_env.pth" in contract


def test_an_installed_comparison_edited_in_place_is_exit_3_naming_it(env):
    """The comparison the frozen test calls is edited where it is installed to always agree; the op is wrong.
    Its digest is no longer the one its distribution's RECORD gives."""
    python, purelib, root = env
    (root / "op.py").write_text(WRONG)
    (purelib / "cmpkit" / "__init__.py").write_text("def close(a, b):\n    return True\n")
    code, result, err = _gate(python, root)
    assert code == 3, err[-3000:]
    label = os.path.relpath(purelib / "cmpkit" / "__init__.py", sysconfig.get_config_var("prefix"))
    named = _failed(result)
    hit = [name for name in named if name.endswith("cmpkit/__init__.py")]
    assert hit and "is not what its distribution installed (cmpkit's RECORD" in named[hit[0]], named
    assert label  # the label is relative to the environment's prefix, not the judge's absolute path


def test_an_installed_module_only_the_workload_imports_edited_is_exit_3_naming_it(env):
    """The same for a package the frozen tests never import: the working tree's worker loads it, and the gate
    asks the worker what it loaded."""
    python, purelib, root = env
    (purelib / "wkit" / "__init__.py").write_text(WKIT + "# edited after install\n")
    code, result, err = _gate(python, root)
    assert code == 3, err[-3000:]
    named = _failed(result)
    hit = [name for name in named if name.endswith("wkit/__init__.py")]
    assert hit and "is not what its distribution installed (wkit's RECORD" in named[hit[0]], named


PASSING_PLUGIN = textwrap.dedent("""\
    import pytest


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome, report.longrepr = "passed", None  # every test passes, whatever it found
    """)


def _install_plugin(purelib: Path) -> None:
    """A pytest plugin (entry point group ``pytest11``) installed as pip would, digests in its RECORD."""
    _install(purelib, "passplug", PASSING_PLUGIN)
    info = purelib / "passplug-1.0.dist-info"
    (info / "entry_points.txt").write_text("[pytest11]\npassplug = passplug\n")
    with (info / "RECORD").open("a") as record:
        record.write(_record_line("passplug-1.0.dist-info/entry_points.txt", (info / "entry_points.txt").read_bytes())
                     + "\n")


def test_a_pytest_plugin_installed_since_freeze_never_loads(env):
    """A pytest plugin installed after freeze, as pip would install it (its files match its RECORD), that reports
    every test as passed; the op is wrong. Plain pytest in that environment loads it by autoload and passes. The
    gate runs the frozen tests with plugin autoload off and only the plugins the frozen run loaded: the test
    fails, red at correctness."""
    python, purelib, root = env
    (root / "op.py").write_text(WRONG)
    _install_plugin(purelib)
    plain = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_op.py"],
                           cwd=root, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0 and "1 passed" in plain.stdout, plain.stdout[-2000:]  # the cheat works
    code, result, err = _gate(python, root)
    assert code == 1, err[-3000:]
    assert "tests/test_op.py::test_doubles" in _failed(result), _failed(result)
    contract = (root / ".ascendopt" / "contract.yaml").read_text()
    assert "plugins:" in contract  # what the frozen run loaded is recorded


def test_a_start_up_file_planted_since_freeze_is_exit_3_at_integrity(env):
    """A ``.pth`` start-up file (written by an earlier run of the code under test) replaces the comparison
    in every Python that starts, before any test or plugin: the since-freeze record sees it."""
    python, purelib, root = env
    (root / "op.py").write_text(WRONG)
    (purelib / "zz_agree.pth").write_text("import cmpkit; cmpkit.close = lambda a, b: True\n")
    code, result, err = _gate(python, root)
    assert code == 3, err[-3000:]
    integrity = result["stages"][0]
    assert integrity["status"] == "fail"
    assert "zz_agree.pth: a start-up file of the environment appeared since freeze" in integrity["summary"]


def test_a_start_up_file_written_during_the_gate_is_exit_3(env):
    """The op is right, but importing it writes a start-up file into the environment for the next command:
    the gate compares the start-up files when it starts and when its last child has ended."""
    python, purelib, root = env
    (root / "op.py").write_text(f"import pathlib\n\npathlib.Path({str(purelib / 'zz_later.pth')!r}).write_text("
                                "'import cmpkit; cmpkit.close = lambda a, b: True\\n')\n\n" + OP)
    code, result, err = _gate(python, root)
    assert code == 3, err[-3000:]
    assert any("zz_later.pth: a start-up file of the environment appeared since the command started" in message
               for message in _failed(result).values()), _failed(result)


def test_a_start_up_file_written_during_a_round_makes_it_a_drop_with_exit_3(env):
    """The same during ``optimize-round``: the round is recorded as a drop, red at integrity, exit 3."""
    python, purelib, root = env
    (root / "op.py").write_text(f"import pathlib\n\npathlib.Path({str(purelib / 'zz_round.pth')!r}).write_text("
                                "'import cmpkit; cmpkit.close = lambda a, b: True\\n')\n\n" + OP)
    code, out, err = _ascendopt(python, root, "optimize-round", "--hypothesis", "poison the environment",
                                "--no-reprofile", "--pairs", "12", "--json")
    assert code == 3, err[-3000:]
    record = json_payload(out)
    assert record["verdict"] == "drop" and record["gate"]["failed_stage"] == "integrity"
    assert "zz_round.pth: a start-up file of the environment appeared since the command started" in \
        record["gate"]["summary"]


def test_an_edited_comparison_in_a_virtual_environment_inside_the_repository_is_exit_3(tmp_path):
    """The same edit when the environment is a ``.venv`` folder inside the repository, as many projects keep
    it (ignored by git): its files are the environment's, so they are checked against their RECORD rather than
    left out as the repository's."""
    root = commit_repo(tmp_path / "repo", {"op.py": OP, "bench.py": BENCH, "tests/test_op.py": TEST,
                                           ".gitignore": ".venv/\n"})
    python, purelib = _make_env(root / ".venv")
    code, out, err = _ascendopt(python, root, "freeze", *FREEZE)
    assert code == 0, err[-3000:]
    (root / "op.py").write_text(WRONG)
    (purelib / "cmpkit" / "__init__.py").write_text("def close(a, b):\n    return True\n")
    code, result, err = _gate(python, root)
    assert code == 3, err[-3000:]
    named = _failed(result)
    hit = [name for name in named if name.endswith("cmpkit/__init__.py")]
    assert hit and "is not what its distribution installed (cmpkit's RECORD" in named[hit[0]], named
