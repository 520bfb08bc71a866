"""The frozen test set of own code: the gate wants every test that passed at freeze to pass again.

Each case is a small own-code repository in tmp_path (git, frozen once, copied per test) where the
frozen test files stay untouched, yet the tests would not really run: a new conftest.py that skips
them, a pytest configuration edited to deselect them, an environment that skips one, a renamed
parametrization, a run that collects but runs nothing, a non-pytest command that reports a failure.
"""

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from _cli_json import json_payload
from _own_code import on_another_runner, working_copy

OP = textwrap.dedent("""\
    CASES = [3]  # the sizes the tests use (their node ids follow them)


    def my_op(x):
        return x * 2
    """)
TEST = textwrap.dedent("""\
    import os

    import pytest
    import torch
    from op import CASES, my_op


    @pytest.mark.skipif(os.environ.get("OP_SKIP") == "1", reason="OP_SKIP is set")
    def test_doubles():
        assert my_op(torch.ones(40)).tolist() == [2.0] * 40


    @pytest.mark.parametrize("n", CASES)
    def test_sizes(n):
        assert my_op(torch.ones(n)).sum().item() == 2 * n
    """)
BENCH = textwrap.dedent("""\
    import torch
    from op import my_op

    x = torch.ones(8)


    def workload():
        with torch.profiler.record_function("my_op_kernel"):
            my_op(x)
    """)
PYPROJECT = textwrap.dedent("""\
    [project]
    name = "mine"
    version = "0.1.0"

    [tool.pytest.ini_options]
    addopts = "-q"
    """)
SKIP_ALL = textwrap.dedent("""\
    import pytest


    def pytest_collection_modifyitems(items):
        for item in items:
            item.add_marker(pytest.mark.skip(reason="later"))
    """)
FREEZE = ("freeze", "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter", "my_op_kernel")


def _commit(root, files):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    """op + two tests + workload + pytest.ini + a pyproject.toml with a pytest section, frozen once."""
    from conftest import run_cli

    root = tmp_path_factory.mktemp("testset") / "repo"
    _commit(root, {"op.py": OP, "tests/test_op.py": TEST, "bench.py": BENCH, "pytest.ini": "[pytest]\naddopts = -q\n",
                   "pyproject.toml": PYPROJECT})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASCENDOPT_BACKEND", "cpu")
        mp.delenv("OP_SKIP", raising=False)
        mp.chdir(root)
        code, out, err = run_cli(*FREEZE)
    assert code == 0, err
    return root


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    copy = working_copy(frozen_repo, tmp_path, monkeypatch)
    monkeypatch.delenv("OP_SKIP", raising=False)
    return copy


def _gate(cli, *extra):
    code, out, err = cli("gate", "--skip-perf", "--json", *extra)
    return code, json_payload(out), err


def test_freeze_records_each_test_and_pins_the_pytest_configuration(frozen_repo):
    from ascendopt.contract.model import load
    from ascendopt.workspace import Workspace

    c = load(Workspace(frozen_repo / ".ascendopt"))
    from importlib.metadata import entry_points

    tests = {"tests/test_op.py::test_doubles": "passed", "tests/test_op.py::test_sizes[3]": "passed"}
    assert {k: v for k, v in c.test_set.items() if k != "plugins"} == {"runner": "pytest", "tests": tests}
    # the installed pytest plugins the frozen run registered (the gate loads exactly these): installed ones only
    assert set(c.test_set["plugins"]) <= {ep.name for ep in entry_points(group="pytest11")}
    assert [(f.path, f.role) for f in c.frozen_files if f.role == "test-config"] == [
        ("pytest.ini", "test-config"), ("pyproject.toml::[tool.pytest]", "test-config")]


def test_the_unchanged_tree_passes_with_one_check_per_frozen_test(repo, cli):
    code, result, err = _gate(cli)
    assert code == 0, err
    correctness = result["stages"][1]
    assert [(c["name"], c["passed"]) for c in correctness["checks"] if c["name"].startswith("tests/")] == [
        ("tests/test_op.py::test_doubles", True), ("tests/test_op.py::test_sizes[3]", True)]
    assert correctness["summary"].startswith("frozen tests passed: 2 of 2 that passed at freeze")


def test_wrong_kernel_with_an_untracked_skip_all_conftest_is_exit_3_naming_it(repo, cli):
    (repo / "op.py").write_text(OP.replace("x * 2", "x * 3"))
    (repo / "tests" / "conftest.py").write_text(SKIP_ALL)  # untracked, on the tests' path, not a frozen file
    code, result, err = _gate(cli)
    assert code == 3, err
    assert "tests/conftest.py: pytest configuration on the frozen tests' paths added since freeze" in err


def test_a_skip_marker_inside_the_frozen_test_file_is_exit_3(repo, cli):
    test = repo / "tests" / "test_op.py"
    test.write_text(test.read_text() + "\npytestmark = pytest.mark.skip(reason='later')\n")
    code, result, err = _gate(cli)
    assert code == 3 and "tests/test_op.py: frozen test file changed since freeze" in err


def test_a_test_skipped_by_the_environment_is_red_naming_it(repo, cli, monkeypatch, tmp_path):
    monkeypatch.setenv("OP_SKIP", "1")  # the frozen files are untouched; the skipif condition is not
    code, result, err = _gate(cli, "--junit", str(tmp_path / "gate.xml"))
    assert code == 1, err
    correctness = result["stages"][1]
    assert correctness["summary"] == "1 frozen test(s) not passing: tests/test_op.py::test_doubles (skipped)"
    check = correctness["checks"][0]
    assert check["name"] == "tests/test_op.py::test_doubles" and not check["passed"]
    assert check["message"].startswith("skipped (passed at freeze)") and "OP_SKIP is set" in check["message"]
    cases = ET.parse(tmp_path / "gate.xml").getroot().iter("testcase")
    tests = {c.get("name"): c.find("failure") is not None for c in cases if c.get("classname") == "gate.correctness"}
    assert tests == {"tests/test_op.py::test_doubles": True, "tests/test_op.py::test_sizes[3]": False}


def test_a_deselecting_pytest_ini_edit_is_exit_3(repo, cli):
    (repo / "pytest.ini").write_text("[pytest]\naddopts = -q -k 'not test_doubles'\n")
    code, result, err = _gate(cli)
    assert code == 3 and "pytest.ini: frozen test-config file changed since freeze" in err


def test_only_the_pytest_section_of_pyproject_is_pinned(repo, cli):
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(PYPROJECT.replace('version = "0.1.0"', 'version = "0.2.0"'))  # not pytest's business
    code, result, err = _gate(cli)
    assert code == 0, err
    pyproject.write_text(PYPROJECT.replace('addopts = "-q"', 'addopts = "-q -k not_test_doubles"'))
    code, result, err = _gate(cli)
    assert code == 3 and "pyproject.toml::[tool.pytest]: frozen test-config file changed since freeze" in err


def test_a_renamed_test_is_red(repo, cli):
    (repo / "op.py").write_text(OP.replace("CASES = [3]", "CASES = [4]"))  # test_sizes[3] becomes test_sizes[4]
    code, result, err = _gate(cli)
    assert code == 1, err
    summary = result["stages"][1]["summary"]
    assert summary == "1 frozen test(s) not passing: tests/test_op.py::test_sizes[3] (missing)"


def test_a_run_of_no_test_is_red(repo, cli, monkeypatch):
    on_another_runner(monkeypatch)  # the variables are pinned only where freeze ran: this tests what holds beyond
    monkeypatch.setenv("PYTEST_ADDOPTS", "--collect-only")  # pytest exits 0 and runs nothing
    code, result, err = _gate(cli)
    assert code == 1, err
    assert result["stages"][1]["summary"] == "the frozen test command ran no test (2 not run)"


def test_hanging_tests_are_red_at_their_limit(repo, cli):
    (repo / "op.py").write_text("import time\n\n" + OP.replace("    return", "    time.sleep(300)\n    return"))
    code, result, err = _gate(cli, "--timeout", "10")
    assert code == 1, err
    assert result["stages"][1]["summary"] == "frozen tests: timed out after 10 s (killed with its process group)"


def test_freeze_shows_the_failing_tests_own_error_lines(repo, cli):
    (repo / "op.py").write_text(OP.replace("x * 2", "x * 3"))
    code, out, err = cli(*FREEZE, "--force")
    assert code == 1
    assert "refusing to freeze: tests/test_op.py::test_doubles (tests/test_op.py:10): assert [3.0" in err
    assert "At index 0 diff: 3.0 != 2.0" in err  # an E line of the traceback, not in pytest's summary line


def test_freeze_refuses_a_run_where_no_test_passed(repo, cli, monkeypatch):
    monkeypatch.setenv("OP_SKIP", "1")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k test_doubles")
    code, out, err = cli(*FREEZE, "--force")
    assert code == 1 and "refusing to freeze: no frozen test passed on the baseline (1 deselected, 1 skipped)" in err


def test_a_non_pytest_command_must_print_n_passed(repo, cli):
    code, out, err = cli(*FREEZE, "--force", "--test-cmd", """python -c "print('all good')" """)
    assert code == 1
    assert "the frozen test command printed no 'N passed' line; a frozen test command that is not pytest must" in err
    from ascendopt.contract.model import load
    from ascendopt.workspace import Workspace

    assert load(Workspace(repo / ".ascendopt")).test_set["runner"] == "pytest"  # the previous contract stayed


def test_the_gate_applies_the_rule_to_a_non_pytest_command(repo, cli):
    (repo / "check.py").write_text(textwrap.dedent("""\
        import torch
        from op import my_op

        ok = my_op(torch.ones(3)).tolist() == [2.0] * 3
        print("Tests: 1 passed" if ok else "Tests: 0 passed, 1 failed")  # exits 0 either way
        """))
    code, out, err = cli(*FREEZE, "--force", "--test-cmd", "python check.py")
    assert code == 0, err
    (repo / "op.py").write_text(OP.replace("x * 2", "x * 3"))
    code, result, err = _gate(cli)
    assert code == 1, err
    assert result["stages"][1]["summary"].startswith("the frozen test command printed 'Tests: 0 passed, 1 failed'")


def test_the_gate_and_the_report_show_a_frozen_test_command_quoted_as_a_shell_needs_it(repo, cli):
    """A ``-k`` expression with spaces (own_code_loop.py's fla cpu loop freezes one) is shown quoted, so the
    gate's status line and the report's command, copied into a shell, run the frozen selection (not
    ``-k doubles`` and two more arguments)."""
    command = 'python -m pytest -q tests/test_op.py -k "doubles or sizes"'
    code, out, err = cli(*FREEZE, "--force", "--test-cmd", command)
    assert code == 0, err
    code, out, err = cli("gate", "--skip-perf")
    assert code == 0, err
    assert "gate: running frozen tests: python -m pytest -q tests/test_op.py -k 'doubles or sizes' (limit" in err
    code, out, err = cli("report", "--out", "report.md")
    assert code == 0, err
    assert "\npython -m pytest -q tests/test_op.py -k 'doubles or sizes'\n" in (repo / "report.md").read_text()


def test_freeze_on_cpu_needs_no_triton_interpret_in_the_environment(tmp_path):
    """A user's shell has no TRITON_INTERPRET: the tests' and the workload's children still run the
    Triton kernel in the interpreter (a fresh process, as from the shell)."""
    root = tmp_path / "repo"
    _commit(root, {
        "op.py": textwrap.dedent("""\
            import torch
            import triton
            import triton.language as tl


            @triton.jit
            def _double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


            def my_op(x):
                y = torch.empty_like(x)
                _double_kernel[(triton.cdiv(x.numel(), 32),)](x, y, x.numel(), BLOCK=32)
                return y
            """),
        "tests/test_op.py": "import torch\nfrom op import my_op\n\n\ndef test_doubles():\n"
                            "    assert my_op(torch.ones(40)).tolist() == [2.0] * 40\n",
        "bench.py": "import torch\nfrom op import my_op\n\nx = torch.ones(64)\n\n\ndef workload():\n    my_op(x)\n"})
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "ASCENDOPT_BACKEND")}
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "--backend", "cpu", "freeze", "--exec-file", "bench.py",
                           "--test", "tests/test_op.py", "--kernel-filter", "_double"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "_double_kernel" in (root / ".ascendopt" / "contract.yaml").read_text()


def test_freeze_without_pytest_in_this_python_is_exit_5_not_a_failing_baseline(tmp_path):
    """The quick-start install has no pytest; own-code freeze runs pytest by default. The missing module is an
    environment problem (exit 5) that says what to install, never "the baseline fails its tests"."""
    from _own_code import commit_repo, sleep_repo_files

    repo = commit_repo(tmp_path / "repo", sleep_repo_files())
    # sys.modules[name] = None is Python's own way of making a module unimportable in this process
    script = ("import sys; sys.modules['pytest'] = None; from ascendopt.cli import main; "
              "main(['freeze', '--exec-file', 'bench.py', '--test', 'tests/test_op.py', "
              "'--kernel-filter', 'my_op_kernel'])")
    env = {**os.environ, "ASCENDOPT_BACKEND": "cpu"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 5, proc.stderr[-2000:]
    assert "pytest is not installed in this Python" in proc.stderr and "pip install pytest" in proc.stderr
    assert "fail" not in proc.stderr.lower() and "Traceback" not in proc.stderr
    assert not (repo / ".ascendopt" / "contract.yaml").exists()  # nothing frozen


def test_a_project_without_pytest_xdist_freezes_and_gates(tmp_path, monkeypatch):
    """Most projects' environments have no pytest-xdist. The reporting plugin must not implement xdist's hooks
    there: pytest stops with an internal error on a plugin hook it does not know, and every test went unrun
    ("ran no test"). ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` leaves xdist (and every other installed plugin)
    unloaded, as in an environment without them."""
    from _own_code import commit_repo, freeze_in, sleep_repo_files
    from conftest import run_cli

    root = commit_repo(tmp_path / "repo", sleep_repo_files(0.002))
    no_plugins = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_op_kernel", "--no-profile", "--no-precheck", env=no_plugins)
    assert code == 0, err
    monkeypatch.chdir(root)
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    code, out, err = run_cli("gate", "--skip-perf")
    assert code == 0, out + err


def test_pytest_failing_before_any_test_is_named_with_its_error(tmp_path):
    """A run in which pytest itself fails (an internal error in a hook) says so, with pytest's error line, not
    only that no test ran."""
    from ascendopt.judge.testset import run_tests

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "tests" / "conftest.py").write_text(
        "def pytest_collection_modifyitems(items):\n    raise RuntimeError('broken hook in collection')\n")
    run = run_tests([sys.executable, "-m", "pytest", "-q", "tests/test_a.py"], tmp_path, timeout=120)
    assert run.problem is not None and run.problem.startswith("ran no test"), run.problem
    assert "pytest exited 3 (internal error)" in run.problem and "broken hook in collection" in run.problem
