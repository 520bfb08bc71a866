"""The judge's scope for own code: everything the frozen test run loads is pinned, the runner is the
environment's, the report is authenticated, and the comparison functions stay the originals.

One small repository in tmp_path (git, frozen once, copied per test): a target ``op.py``, a test that
imports a helper module and a reference implementation, reads an expected-output file and compares with
``torch.allclose``, ``torch.testing.assert_close`` and ``pytest.approx``. Each attack leaves the frozen
test files untouched and makes the op wrong (``x * 3``), so a gate that misses the attack is green on
wrong code. The classes follow the published reward-hacking pattern lists: KernelBench's eval-hacking
cases and KernelGuard's patterns (monkeypatching the checker's comparison, writing the harness's
result file and exiting early, test-harness detection), the hacker-fixer papers' "environment
tampering" class (a shadowing ``pytest`` module, configuration and conftest edits), and Wafer's
reward-hack field guide (editing expected outputs and helpers instead of the code).
"""

import textwrap

import pytest

from _cli_json import json_payload
from _own_code import commit_repo, freeze_in, on_another_runner, plant_bytecode, working_copy
from ascendopt.judge.pytest_report import MAX_HASHED_BYTES

OP = "def my_op(x):\n    return x * 2\n"
WRONG = "def my_op(x):\n    return x * 3\n"
HELPERS = "def ones(n):\n    import torch\n\n    return torch.ones(n)\n"
REFERENCE = "def reference(x):\n    return x + x\n"
TEST = textwrap.dedent("""\
    import json
    import pathlib

    import pytest
    import torch
    from helpers import ones
    from ref_impl import reference

    from op import my_op

    EXPECTED = json.loads((pathlib.Path(__file__).parent / "data" / "expected.json").read_text())


    def test_matches_reference():
        x = ones(8)
        assert torch.allclose(my_op(x), reference(x))


    def test_matches_expected():
        torch.testing.assert_close(my_op(ones(4)), torch.tensor(EXPECTED["ones4"]))


    def test_scalar():
        assert my_op(ones(1)).item() == pytest.approx(EXPECTED["one"])
    """)
BENCH = textwrap.dedent("""\
    import torch
    from op import my_op

    x = torch.ones(8)


    def workload():
        with torch.profiler.record_function("my_op_kernel"):
            return my_op(x)
    """)
FILES = {"op.py": OP, "ref_impl.py": REFERENCE, "tests/helpers.py": HELPERS, "tests/test_op.py": TEST,
         "tests/data/expected.json": '{"ones4": [2.0, 2.0, 2.0, 2.0], "one": 2.0}\n', "bench.py": BENCH,
         "pytest.ini": "[pytest]\naddopts = -q\n"}
FREEZE = ("--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter", "my_op_kernel",
          "--no-profile", "--no-equivalence")
# Target code that behaves only under the test harness (KernelBench / KernelGuard: "detect the evaluator"):
# the workload never imports pytest, the test run does.
UNDER_TEST = 'import sys\n\nif "pytest" in sys.modules:\n{body}\n'


@pytest.fixture(scope="module")
def frozen_repo(tmp_path_factory):
    root = commit_repo(tmp_path_factory.mktemp("scope") / "repo", FILES)
    code, out, err = freeze_in(root, *FREEZE)
    assert code == 0, err
    return root


@pytest.fixture
def repo(frozen_repo, tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    return working_copy(frozen_repo, tmp_path, monkeypatch)


def _gate(cli):
    code, out, err = cli("gate", "--skip-perf", "--json")
    return code, json_payload(out), err


def _under_test(body: str) -> str:
    return UNDER_TEST.format(body=textwrap.indent(textwrap.dedent(body), "    ")) + WRONG


def test_freeze_pins_what_the_tests_load_and_declares_the_workloads_imports_the_target(frozen_repo, cli,
                                                                                       monkeypatch):
    from ascendopt.contract.model import load
    from ascendopt.workspace import Workspace

    contract = load(Workspace(frozen_repo / ".ascendopt"))
    assert contract.targets == ("op.py",)
    roles = {f.path: f.role for f in contract.frozen_files}
    assert roles["tests/helpers.py"] == roles["ref_impl.py"] == roles["tests/data/expected.json"] == "test-support"
    assert roles["pytest.ini"] == "test-config"
    assert "op.py" not in roles
    monkeypatch.chdir(frozen_repo)
    code, out, err = cli("status", "--json")
    assert code == 0, err
    assert json_payload(out)["contract"]["target_code"] == ["op.py"]


def test_control_the_unchanged_tree_passes(repo, cli):
    code, result, err = _gate(cli)
    assert code == 0, err
    assert result["stages"][1]["summary"].startswith("frozen tests passed: 3 of 3")


def test_control_an_honest_edit_of_the_target_code_split_into_a_new_module_passes(repo, cli):
    # a round may rewrite the target and move code into a new module the target imports
    (repo / "op_impl.py").write_text("def double(x):\n    return x + x\n")
    (repo / "op.py").write_text("from op_impl import double\n\n\ndef my_op(x):\n    return double(x)\n")
    code, result, err = _gate(cli)
    assert code == 0, err


def test_a_changed_helper_module_is_exit_3_naming_it(repo, cli):
    """Wafer's field guide: make the helper the test relies on produce what the wrong op gives."""
    (repo / "op.py").write_text(WRONG)
    (repo / "tests" / "helpers.py").write_text(HELPERS.replace("torch.ones(n)", "torch.ones(n) * 2 / 3"))
    code, result, err = _gate(cli)
    assert code == 3, err
    assert "tests/helpers.py: frozen test-support file changed since freeze" in err


def test_an_edited_reference_implementation_is_exit_3(repo, cli):
    (repo / "op.py").write_text(WRONG)
    (repo / "ref_impl.py").write_text("def reference(x):\n    return x * 3\n")
    code, result, err = _gate(cli)
    assert code == 3 and "ref_impl.py: frozen test-support file changed since freeze" in err


def test_an_edited_expected_output_file_is_exit_3(repo, cli):
    (repo / "tests" / "data" / "expected.json").write_text('{"ones4": [3.0, 3.0, 3.0, 3.0], "one": 3.0}\n')
    code, result, err = _gate(cli)
    assert code == 3 and "tests/data/expected.json: frozen test-support file changed since freeze" in err


def test_a_new_module_only_the_test_run_imports_is_exit_3_naming_it(repo, cli):
    """Harness detection: the target imports a new module only under pytest (the workload does not)."""
    (repo / "_quiet.py").write_text("LOADED = True\n")
    (repo / "op.py").write_text(_under_test("import _quiet  # noqa: F401"))
    code, result, err = _gate(cli)
    assert code == 3, err
    assert "_quiet.py: a module the tests imported takes part in the test run since freeze" in err


def test_a_report_rewriting_conftest_above_the_repository_is_exit_3(repo, cli, tmp_path, monkeypatch):
    """A conftest outside the repository (here pulled in through the environment's --confcutdir) that
    turns every failing test into a pass: green on wrong code before the scope was pinned."""
    on_another_runner(monkeypatch)  # the variables are pinned only where freeze ran: this tests what holds beyond
    (repo / "op.py").write_text(WRONG)
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""\
        import pytest


        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            report = outcome.get_result()
            report.outcome = "passed"
            report.longrepr = None
        """))
    monkeypatch.setenv("PYTEST_ADDOPTS", f"--confcutdir={tmp_path}")
    code, result, err = _gate(cli)
    assert code == 3, err
    assert "../conftest.py: pytest configuration (a conftest or the configuration file pytest read) takes part" in err


def test_a_configuration_file_named_by_the_environment_is_exit_3(repo, cli, tmp_path, monkeypatch):
    """PYTEST_ADDOPTS -c names another ini whose addopts deselect the failing tests."""
    on_another_runner(monkeypatch)  # the variables are pinned only where freeze ran: this tests what holds beyond
    (repo / "op.py").write_text(WRONG)
    other = tmp_path / "other.ini"
    other.write_text("[pytest]\naddopts = -q -k 'not matches'\n")
    monkeypatch.setenv("PYTEST_ADDOPTS", f"-c {other} --rootdir={repo}")
    code, result, err = _gate(cli)
    assert code == 3, err
    assert "../other.ini: pytest configuration" in err


SHADOW_PYTEST = textwrap.dedent("""\
    import json, os, sys

    ids = ["tests/test_op.py::test_matches_reference", "tests/test_op.py::test_matches_expected",
           "tests/test_op.py::test_scalar"]
    report = {"version": 1, "exitstatus": 0, "collected": ids, "deselected": [],
              "outcomes": {i: "passed" for i in ids}, "details": {}}
    with open(os.environ["ASCENDOPT_PYTEST_REPORT"], "w") as fh:
        json.dump(report, fh)
    print("3 passed")
    sys.exit(0)
    """)


def test_a_repository_pytest_module_does_not_run(repo, cli):
    """Environment tampering: a pytest.py at the repository root that writes an all-passed report in the
    format the plugin wrote before, and exits 0 (``python -m pytest`` in the repository would run it)."""
    (repo / "op.py").write_text(WRONG)
    (repo / "pytest.py").write_text(SHADOW_PYTEST)
    code, result, err = _gate(cli)
    assert code == 1, err  # the real pytest ran the frozen tests, and they fail on the wrong op
    assert result["stages"][1]["summary"].startswith("3 frozen test(s) not passing")


def test_a_repository_pytest_module_put_first_by_pythonpath_cannot_forge_the_report(repo, cli, monkeypatch):
    """The same shadow with the repository on the user's PYTHONPATH: it runs, and its report does not verify."""
    on_another_runner(monkeypatch)  # the variables are pinned only where freeze ran: this tests what holds beyond
    (repo / "op.py").write_text(WRONG)
    (repo / "pytest.py").write_text(SHADOW_PYTEST)
    monkeypatch.setenv("PYTHONPATH", str(repo))
    code, result, err = _gate(cli)
    assert code == 3, err
    assert "the test report is not one the plugin writes" in err


def test_a_forged_report_written_by_the_code_under_test_is_exit_3(repo, cli):
    """KernelGuard / KernelBench: write the harness's result file, then leave before the real one is written."""
    (repo / "op.py").write_text(_under_test("""\
        import json, os

        ids = ["tests/test_op.py::test_matches_reference", "tests/test_op.py::test_matches_expected",
               "tests/test_op.py::test_scalar"]
        payload = {"version": 2, "exitstatus": 0, "collected": ids, "deselected": [],
                   "outcomes": {i: "passed" for i in ids}, "details": {}, "used": {}, "runner": {},
                   "comparisons": {"checked": 0, "replaced": []}}
        report = {"version": 1, **payload, "payload": json.dumps(payload), "mac": "0" * 64}
        with open(os.environ["ASCENDOPT_PYTEST_REPORT"], "w") as fh:
            json.dump(report, fh)
        os._exit(0)
        """))
    code, result, err = _gate(cli)
    assert code == 3, err
    assert "the test report's authentication code does not match this run's key" in err


RUNTEST_PATCH = textwrap.dedent("""\
    import _pytest.python as _p

    _run = _p.Function.runtest


    def _quiet(self):
        try:
            _run(self)
        except AssertionError:
            pass


    _p.Function.runtest = _quiet
    """)


@pytest.mark.parametrize("patch, name", [
    ("import torch\ntorch.allclose = lambda *a, **k: True", "torch.allclose"),
    ("import torch.testing\ntorch.testing.assert_close.__code__ = (lambda *a, **k: None).__code__",
     "torch.testing.assert_close"),
    ("import pytest\ntype(pytest.approx(1.0)).__eq__ = lambda self, other: True",
     f"{pytest.approx.__module__}.ApproxScalar.__eq__"),
    # red team round 4, l1: pytest's own runner made to swallow a failed assert, no comparison touched
    (RUNTEST_PATCH, "_pytest.python.Function.runtest"),
])
def test_a_replaced_comparison_function_is_exit_3_naming_it(repo, cli, patch, name):
    """KernelBench's eval hacking / KernelGuard: monkeypatch the checker's comparison to always agree, or
    pytest's runner to turn a failed assert into a pass."""
    (repo / "op.py").write_text(_under_test(patch))
    code, result, err = _gate(cli)
    assert code == 3, err
    what = "pytest runner" if name.startswith("_pytest.") else "comparison"
    assert f"the {what} function was replaced during the test run" in err
    named = {c["name"]: c["message"] for c in result["stages"][1]["checks"] if not c["passed"]}
    assert named[name].startswith(f"{name}: the {what} function was replaced during the test run")


# -- cached byte code -------------------------------------------------------------------------------


def test_planted_byte_code_of_a_pinned_helper_never_runs(repo, cli):
    """Wafer's field guide ("stale or planted artefacts") / KernelGuard's harness manipulation: the pinned
    helper keeps its digest, but a ``__pycache__`` file stamped with its modification time and size holds
    other code (it puts a right ``op`` in ``sys.modules``), so CPython would run that instead of the source."""
    (repo / "op.py").write_text(WRONG)
    plant_bytecode(repo / "tests" / "helpers.py", HELPERS + textwrap.dedent("""        import sys, types

        _op = types.ModuleType("op")
        _op.my_op = lambda x: x * 2
        sys.modules["op"] = _op
        """))
    code, result, err = _gate(cli)
    assert code == 1, err
    failed = [c["name"] for c in result["stages"][1]["checks"] if not c["passed"]]
    assert "tests/test_op.py::test_matches_reference" in failed


def test_planted_rewritten_byte_code_of_a_frozen_test_file_never_runs(repo, cli):
    """The same class through pytest's own cache: a rewritten-test byte code file for the frozen test file,
    stamped like it, whose three tests assert nothing. pytest rewrites the pinned source instead."""
    (repo / "op.py").write_text(WRONG)
    plant_bytecode(repo / "tests" / "test_op.py", "def test_matches_reference():\n    pass\n\n\n"
                   "def test_matches_expected():\n    pass\n\n\ndef test_scalar():\n    pass\n",
                   pytest_rewritten=True)
    code, result, err = _gate(cli)
    assert code == 1, err
    failed = {c["name"] for c in result["stages"][1]["checks"] if not c["passed"]}
    assert {"tests/test_op.py::test_matches_reference", "tests/test_op.py::test_scalar"} <= failed


def test_undoing_the_source_only_import_is_exit_3_naming_it(repo, cli):
    """KernelGuard's harness manipulation, against this defence: the target code restores the import
    system's byte code reading under the test run. The run reports it."""
    (repo / "op.py").write_text(_under_test("""\
        from importlib.machinery import SourceFileLoader

        del SourceFileLoader.get_code
        """))
    code, result, err = _gate(cli)
    assert code == 3, err
    name = "importlib.machinery.SourceFileLoader.get_code"
    named = {c["name"]: c["message"] for c in result["stages"][1]["checks"] if not c["passed"]}
    assert named[name].startswith(f"{name}: the judge's source-only import was undone during the test run")



def test_planted_byte_code_never_runs_in_pytest_xdist_workers_either(tmp_path, cli, monkeypatch):
    """The planted helper again, with the frozen command running the tests in pytest-xdist workers (which
    the launcher does not start): each worker loads the repository from source as well."""
    root = commit_repo(tmp_path / "xdist" / "repo", FILES)
    code, out, err = freeze_in(root, *FREEZE, "--test-cmd", "python -m pytest -q -n 2 tests/test_op.py")
    assert code == 0, err
    copy = working_copy(root, tmp_path, monkeypatch)
    (copy / "op.py").write_text(WRONG)
    plant_bytecode(copy / "tests" / "helpers.py", HELPERS + "import sys, types\n\n_op = types.ModuleType('op')\n"
                   "_op.my_op = lambda x: x * 2\nsys.modules['op'] = _op\n")
    code, result, err = _gate(cli)
    assert code == 1, err
    failed = [c["name"] for c in result["stages"][1]["checks"] if not c["passed"]]
    assert "tests/test_op.py::test_matches_reference" in failed


ORDER_TEST = textwrap.dedent("""\
    import torch

    from op import my_op
    from ref_impl import reference


    def test_matches_reference():
        x = torch.ones(8)
        assert torch.allclose(my_op(x), reference(x))
    """)


def test_a_pinned_file_changed_only_while_the_tests_import_it_is_exit_3(tmp_path, cli, monkeypatch):
    """Wafer's "edit the reference, not the kernel", made invisible to a digest taken before or after the run:
    the wrong op, imported first, rewrites the pinned reference to agree with it, and puts the original back
    (bytes and modification time) when the test process exits. The run reports the digest of what it compiled."""
    root = commit_repo(tmp_path / "order" / "repo", {"op.py": OP, "ref_impl.py": REFERENCE,
                                                     "tests/test_op.py": ORDER_TEST, "bench.py": BENCH})
    code, out, err = freeze_in(root, *FREEZE)
    assert code == 0, err
    copy = working_copy(root, tmp_path, monkeypatch)
    (copy / "op.py").write_text(_under_test("""\
        import atexit, os, pathlib

        _ref = pathlib.Path(__file__).with_name("ref_impl.py")
        _orig, _stat = _ref.read_bytes(), _ref.stat()
        _ref.write_bytes(_orig.replace(b"x + x", b"x * 3"))


        def _put_back():
            _ref.write_bytes(_orig)
            os.utime(_ref, ns=(_stat.st_atime_ns, _stat.st_mtime_ns))


        atexit.register(_put_back)
        """))
    code, result, err = _gate(cli)
    assert code == 3, err
    assert (copy / "ref_impl.py").read_text() == REFERENCE  # put back: a digest after the run would not see it
    named = {c["name"]: c["message"] for c in result["stages"][1]["checks"] if not c["passed"]}
    assert named["ref_impl.py"].startswith("ref_impl.py: the test run used a version of this pinned file")


DATA_TEST = textwrap.dedent("""\
    import json
    import pathlib

    import torch

    from op import my_op

    EXPECTED = json.loads((pathlib.Path(__file__).parent / "data" / "expected.json").read_text())


    def test_matches_expected():
        torch.testing.assert_close(my_op(torch.ones(4)), torch.tensor(EXPECTED["ones4"]))
    """)


@pytest.mark.parametrize("padding", [0, MAX_HASHED_BYTES], ids=["small", "larger-than-hashed-unasked"])
def test_a_pinned_data_file_changed_only_while_the_tests_read_it_is_exit_3(tmp_path, cli, monkeypatch, padding):
    """The same with the expected-output file: the wrong op rewrites it to agree before the test module reads
    it, and puts it back at exit. The run reports the digest of each content it read; a pinned file is hashed
    whatever its size (padded with JSON whitespace past the size the run hashes unasked)."""
    expected = '{"ones4": [2.0, 2.0, 2.0, 2.0]}' + " " * padding + "\n"
    root = commit_repo(tmp_path / "data" / "repo", {"op.py": OP, "tests/test_op.py": DATA_TEST, "bench.py": BENCH,
                                                    "tests/data/expected.json": expected})
    code, out, err = freeze_in(root, *FREEZE)
    assert code == 0, err
    copy = working_copy(root, tmp_path, monkeypatch)
    (copy / "op.py").write_text(_under_test("""\
        import atexit, pathlib

        _data = pathlib.Path(__file__).parent / "tests" / "data" / "expected.json"
        _orig = _data.read_bytes()
        _data.write_bytes(_orig.replace(b"2.0", b"3.0"))
        atexit.register(_data.write_bytes, _orig)
        """))
    code, result, err = _gate(cli)
    assert code == 3, err
    named = {c["name"]: c["message"] for c in result["stages"][1]["checks"] if not c["passed"]}
    rel = "tests/data/expected.json"
    assert named[rel].startswith(f"{rel}: the test run used a version of this pinned file that is not the frozen")
