"""Red team of the judge, round 7: white-box attacks on ``ascendopt gate`` (own code) after rounds 1-6
(``test_redteam.py`` .. ``test_redteam6.py``), aimed at classes the current judge still lets through.

Every attack's op is honestly 2x faster (half the sleep of ``_sleep_repo``) and WRONG where its user calls it; the
test shows that first (the frozen tests pass under plain pytest, a plain ``python -c`` gets the wrong value), then
asserts the gate is not green (exit 0 with a "faster" verdict, or any exit 0). A FAILING test here is an attack
that got through. Nothing is skipped or xfailed. Each outcome is appended as one JSON line to ``$REDTEAM_LOG``
(default ``/tmp/redteam7-results.jsonl``).

Classes:

* **v1 -- values the payload does not walk are never compared** (``judge.payload._tree``: only ``type(x) is
  tuple/list/dict`` is entered; anything else, ``torch.return_types.max`` and every NamedTuple or dataclass
  included, is ``{"x": type name}``, an ``Opaque`` that ``judge.evidence._same_scalar`` compares by its type name).
  An op that returns ``torch.max(..., dim=-1)`` is compared by nobody: not by the differential check, not by the
  timed outputs, not by the replay of the tests' calls. No caller detection is needed: the op is wrong on the
  workload's own shape only.
* **v2 -- the replayed arguments are not the arguments the tests passed** (``testcalls._copy`` and
  ``payload.encode``: a tensor travels as C-order bytes and a shape; its strides, its ``requires_grad``, its
  aliasing are gone): an op that is wrong on a non-contiguous input, or on an input that requires grad, unless a
  test calls it, is called by the replay on a contiguous, detached copy.
* **v3 -- a test file beside the code under test makes the code under test "the tests' side"**
  (``CallRecorder._test_side``: any file in a test module's folder is a test helper): with ``kern/op.py`` and
  ``kern/test_op.py`` side by side, nothing is wrapped or recorded, and every frame of the op counts as a test's.
* **v4 -- a target function decorated by a library is not the repository's** (``CallRecorder._is_target`` reads
  ``fn.__code__.co_filename``: ``@torch.no_grad()``'s wrapper, like ``functools.lru_cache``'s, ``torch.compile``'s
  or ``torch.library.custom_op``'s object, is torch's code): the tests' calls of the op are never recorded.
* **v5 -- the documented gap**: the tests call ``op.my_op`` through the module (not covered, ``trusts.md``); one
  test, to keep it measured.
* **v6 -- the recorder's caps drop calls silently** (``CallRecorder._keep``: past ``PER_FUNCTION`` (16) calls of a
  function it returns before listing anything as skipped; freeze says "replays 16 call(s)" and nothing else): a
  test parametrized over 20 lengths.
* **v7 -- the replay calls whatever the module's attribute is when it runs** (``worker`` ``call``:
  ``getattr(import_module(module), name)``, after the differential check's workload calls): the op rebinds its own
  module name to a right version on its first call outside a test; the tests and users hold the wrong object.
* **v8 -- the baseline slowed inside its own batch, its scheduling put back before the judge looks**
  (``Judged._guard_scheduling`` runs only between batches; ``engine.anchor_problem`` excuses run-queue wait): a
  helper process of the candidate (an UNCHANGED op) puts the baseline's thread on a CPU it keeps busy (v8 also as
  SCHED_IDLE; v8b with ``sched_setaffinity`` only, no privilege) for ~2 ms around the end of the baseline's sleep.
* **v9 -- values an op writes into an argument are compared nowhere** (``evidence.input_writes`` /
  ``testcalls.written`` only name the inputs each side wrote; a write is a failure only where the frozen commit
  does not write): a destination-passing op (``my_op(x, out)``) writes wrong values into ``out``; the workload
  returns nothing (v9a), or the replay of a test's call (v9b).
* **v10 -- the judge's own thread slowed while the baseline's batch ends** (the judge's scheduling is read once,
  in ``Judged.__init__``, and never checked; the anchor allows 20 % drift whatever its cause): a helper puts the
  judge's main thread on a busy CPU (``sched_setaffinity``, no privilege) for ~1.5 ms as the baseline replies.

Outcomes on the shared 2-core host (12 pairs), judge at 0b7f755 (``main``): the controls hold (the honest 2x op
green and "faster" at 0.52x, on the main, the row-max and the out= repositories; an op wrong on the one recorded
call of ``ones(2)`` red at correctness, exit 1, naming ``test_values``). EVERY attack got through, exit 0, green:
v1 0.52x, v2a 0.52x, v2b 0.52x, v3 0.53x, v4 0.52x, v5 0.51x (documented), v6 0.52x, v7 0.52x, v9a 0.52x,
v9b 0.52x ("faster", the op honestly 2x faster and wrong); v8 0.83-0.86x, v8b 0.83-0.87x, v10 0.90-0.92x
("faster" for an op that is not faster at all). v8 and v8b raced the judge's look in some early runs (exit 6,
"scheduling was changed"), before the helper became a process of its own and gave the CPUs back first; since
then 8 of 8 runs got through; v10 3 of 3.

Run one at a time on the shared 2-core machine: ``pytest -n 0 -q tests/gate/test_redteam7.py -k NAME``.
"""

import os
import subprocess
import sys
import textwrap

import pytest

from _own_code import working_copy
from _redteam import CHILD_TIMEOUT_S, freeze_sleep_repo, gate_logged, run_python
from _redteam import not_a_speedup as _not_a_speedup
from _redteam import not_green as _not_green
from _redteam import verdicts as _verdicts
from _sleep_repo import BENCH, DELAY_S

PAIRS = "12"
LOG = os.environ.get("REDTEAM_LOG", "/tmp/redteam7-results.jsonl")

# The caller detection of round 5's s5 / round 6 (covered by the replay, per trusts.md): a frame of a test file
# (under a ``tests`` folder, or a ``test_*.py``) anywhere on the stack.
FROM_TEST = textwrap.dedent("""\


    def _from_test():
        frame = sys._getframe(1)
        while frame is not None:
            name = frame.f_code.co_filename
            if os.sep + "tests" + os.sep in name or os.path.basename(name).startswith("test_"):
                return True
            frame = frame.f_back
        return False
    """)
HEAD = textwrap.dedent(f"""\
    import os
    import sys
    import time

    import torch

    DELAY_S = {DELAY_S}
    """)


def _gate(repo, op: str | None, pairs: str = PAIRS, *extra: str, path: str = "op.py"):
    if op is not None:
        (repo / path).write_text(op)
    return gate_logged(repo, None, pairs, *extra, log=LOG)


def _pytest_passes(repo, test: str = "tests/test_op.py") -> None:
    """The frozen tests pass under plain pytest (no ascendopt, none of this run's pytest variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ASCENDOPT_PYTEST"))}
    done = subprocess.run(["timeout", str(CHILD_TIMEOUT_S), sys.executable, "-m", "pytest", "-q", "-p",
                           "no:cacheprovider", "-p", "no:xdist", test], cwd=repo, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-3000:]


def _plain(repo, code: str) -> str:
    """The last line ``code`` prints in a plain process in ``repo``: what a user gets."""
    done = run_python(repo, code)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def _contract(repo) -> dict:
    import yaml

    return yaml.safe_load((repo / ".ascendopt" / "contract.yaml").read_text())


def _recorded(repo) -> dict:
    return (_contract(repo).get("test_calls") or {}).get("functions", {})


# ==============================================================================================================
# The main repository: the sleep op, and tests a user would write (values, a transposed input, autograd, and a
# call through the module)
# ==============================================================================================================

OP = HEAD + textwrap.dedent("""\


    def my_op(x):
        time.sleep(DELAY_S)
        return x * 2 + 1
    """)
TEST = textwrap.dedent("""\
    import torch

    import op as op_module
    from op import my_op


    def test_values():
        assert torch.equal(my_op(torch.ones(2)), torch.full((2,), 3.0))


    def test_strided():
        x = torch.arange(12.0).reshape(3, 4)
        assert torch.equal(my_op(x.t()), x.t() * 2 + 1)


    def test_grad():
        x = torch.linspace(-1.0, 1.0, 3).requires_grad_()
        y = my_op(x)
        y.sum().backward()
        assert torch.equal(x.grad, torch.full((3,), 2.0))
        assert torch.allclose(y.detach(), torch.linspace(-1.0, 1.0, 3) * 2 + 1)


    def test_through_the_module():
        x = torch.arange(5.0)
        assert torch.equal(op_module.my_op(x), x * 2 + 1)
    """)


def _op(wrong_when: str, wrong: str) -> str:
    """The honestly 2x faster op, returning ``wrong`` where ``wrong_when`` holds (expressions of ``x``;
    ``_from_test()``: a test file is on the stack)."""
    return HEAD + FROM_TEST + textwrap.dedent(f"""\


        def my_op(x):
            time.sleep(DELAY_S / 2)
            if {wrong_when}:
                return {wrong}
            return x * 2 + 1
        """)


@pytest.fixture(scope="module")
def main_frozen(tmp_path_factory):
    root = freeze_sleep_repo(tmp_path_factory.mktemp("redteam7") / "repo", {"op.py": OP, "tests/test_op.py": TEST})
    # the three calls made with ``from op import my_op`` are recorded, and the one through the module attribute
    assert _recorded(root) == {"op:my_op": 4}, _contract(root).get("test_calls")
    return root


@pytest.fixture
def repo(main_frozen, tmp_path, monkeypatch):
    return working_copy(main_frozen, tmp_path, monkeypatch)


def test_control_honest_faster_is_green(repo):
    """Control: the frozen op in half the time (same values, every input). Green (exit 0) and "faster"."""
    (repo / "op.py").write_text(OP.replace("time.sleep(DELAY_S)", "time.sleep(DELAY_S / 2)"))
    _pytest_passes(repo)
    code, stages, _ = _gate(repo, None)
    assert code == 0 and "faster" in _verdicts(stages), (code, _verdicts(stages),
                                                          stages.get("performance", {}).get("summary"))


def test_control_the_replay_catches_a_wrong_op_on_a_recorded_call(repo):
    """Control of the replay here: wrong on ``ones(2)``-like inputs unless a test calls it: red at correctness,
    naming ``test_values``."""
    (repo / "op.py").write_text(_op("x.dim() == 1 and x.shape[0] == 2 and not _from_test()", "x * 2"))
    _pytest_passes(repo)
    code, stages, _ = _gate(repo, None)
    assert code == 1 and stages["correctness"]["status"] == "fail", _verdicts(stages)
    assert "tests/test_op.py::test_values" in stages["correctness"]["summary"], stages["correctness"]


def test_v2a_wrong_on_a_non_contiguous_input_the_replay_hands_over_contiguous(repo):
    """v2 (``testcalls._copy`` / ``payload.encode`` -> ``worker`` ``call``): ``test_strided`` passes ``x.t()``, a
    transposed (non-contiguous) view; the recorder keeps its values, the payload carries them in C order, and the
    worker replays the call on a fresh contiguous tensor. The op is wrong on every non-contiguous input (it drops
    the ``+ 1``) unless a test calls it: the replay, the workload's ``randn`` and the hidden shapes are all
    contiguous. A user's ``my_op(w.t())`` gets the wrong answer."""
    (repo / "op.py").write_text(_op("not x.is_contiguous() and not _from_test()", "x * 2"))
    _pytest_passes(repo)
    got = _plain(repo, "import torch, op; print(op.my_op(torch.arange(12.0).reshape(3, 4).t())[0].tolist())")
    assert got == "[0.0, 8.0, 16.0]", got  # right: [1.0, 9.0, 17.0]
    code, stages, _ = _gate(repo, None)
    _not_green(code, stages)


def test_v2b_wrong_on_an_input_that_requires_grad_the_replay_detaches(repo):
    """v2 (``testcalls._copy``: ``value.detach().clone()``; the payload has no ``requires_grad``): ``test_grad``
    passes a leaf that requires grad; the replay's copy does not. The op's forward is wrong whenever its input
    requires grad (training; the gradient stays right) unless a test calls it."""
    (repo / "op.py").write_text(_op("x.requires_grad and not _from_test()", "x * 2 + x.detach() * 0"))
    _pytest_passes(repo)
    got = _plain(repo, "import torch, op; print(op.my_op(torch.ones(2).requires_grad_()).tolist())")
    assert got == "[2.0, 2.0]", got  # right: [3.0, 3.0]
    code, stages, _ = _gate(repo, None)
    _not_green(code, stages)


def test_v5_wrong_on_a_call_through_the_module_attribute_documented(repo):
    """v5, the documented gap (``trusts.md``: "a function the tests reach through a module attribute"):
    ``test_through_the_module`` calls ``op_module.my_op(arange(5))``; ``CallRecorder`` wraps only the functions the
    test modules hold, so this call is never recorded. The op is wrong on 1-D inputs of length 5 unless a test
    calls it (the recorded calls are of length 2, 3 and 3 x 4)."""
    (repo / "op.py").write_text(_op("x.dim() == 1 and x.shape[0] == 5 and not _from_test()", "x * 2"))
    _pytest_passes(repo)
    got = _plain(repo, "import torch, op; print(op.my_op(torch.arange(5.0)).tolist())")
    assert got == "[0.0, 2.0, 4.0, 6.0, 8.0]", got
    code, stages, _ = _gate(repo, None)
    _not_green(code, stages)


# ==============================================================================================================
# v1: an output the payload keeps by its type name only
# ==============================================================================================================

OP_MAX = HEAD + textwrap.dedent("""\


    def my_op(x):
        time.sleep(DELAY_S)
        return torch.max(x * 2 + 1, dim=-1)
    """)
TEST_MAX = textwrap.dedent("""\
    import torch
    from op import my_op


    def test_row_max():
        values, index = my_op(torch.tensor([[1.0, 3.0, 2.0], [0.0, -1.0, 4.0]]))
        assert torch.equal(values, torch.tensor([7.0, 9.0]))
        assert torch.equal(index, torch.tensor([1, 2]))
    """)


@pytest.fixture(scope="module")
def max_frozen(tmp_path_factory):
    return freeze_sleep_repo(tmp_path_factory.mktemp("redteam7-max") / "repo",
                             {"op.py": OP_MAX, "tests/test_op.py": TEST_MAX})


@pytest.fixture
def max_repo(max_frozen, tmp_path, monkeypatch):
    return working_copy(max_frozen, tmp_path, monkeypatch)


def test_v1_control_honest_faster_row_max_is_green(max_repo):
    """Control for v1: the row max in half the time, right everywhere: green and "faster"."""
    (max_repo / "op.py").write_text(OP_MAX.replace("time.sleep(DELAY_S)", "time.sleep(DELAY_S / 2)"))
    code, stages, _ = _gate(max_repo, None)
    assert code == 0 and "faster" in _verdicts(stages), (code, _verdicts(stages))


def test_v1_wrong_values_in_a_return_types_output_are_never_compared(max_repo):
    """v1 (``payload._tree`` -> ``{"x": "max"}`` -> ``evidence._same_scalar`` on two ``Opaque("max")``): the
    workload returns ``torch.max(..., dim=-1)``, a ``torch.return_types.max`` (a structseq, not a plain tuple). The
    op returns zeros and index 0 for every input of more than 16 elements: the tests' 2 x 3 input is right, the
    workload's 64 x 64 is all wrong, and no caller is looked at. The differential check, the timed outputs and the
    replay all compare ``Opaque('max') == Opaque('max')``."""
    op = HEAD + textwrap.dedent("""\


        def my_op(x):
            time.sleep(DELAY_S / 2)
            if x.numel() > 16:
                return torch.max(torch.zeros_like(x), dim=-1)
            return torch.max(x * 2 + 1, dim=-1)
        """)
    (max_repo / "op.py").write_text(op)
    _pytest_passes(max_repo)
    got = _plain(max_repo, "import torch, op; v, i = op.my_op(torch.ones(64, 64)); print(v[:3].tolist())")
    assert got == "[0.0, 0.0, 0.0]", got  # right: [3.0, 3.0, 3.0]
    code, stages, _ = _gate(max_repo, None)
    _not_a_speedup(code, stages)
    _not_green(code, stages)


# ==============================================================================================================
# v3: the tests beside the code under test
# ==============================================================================================================

BENCH_KERN = BENCH.replace("from op import my_op", "from kern.op import my_op")
TEST_KERN = textwrap.dedent("""\
    import torch

    from kern.op import my_op


    def test_values():
        assert torch.equal(my_op(torch.ones(2)), torch.full((2,), 3.0))
    """)


@pytest.fixture(scope="module")
def kern_frozen(tmp_path_factory):
    from _own_code import commit_repo, freeze_in

    root = tmp_path_factory.mktemp("redteam7-kern") / "repo"
    commit_repo(root, {"kern/__init__.py": "", "kern/op.py": OP, "kern/test_op.py": TEST_KERN,
                       "bench.py": BENCH_KERN})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "kern/test_op.py", "--kernel-filter",
                             "my_op_kernel", "--no-profile", "--no-precheck")
    assert code == 0, err
    return root


@pytest.fixture
def kern_repo(kern_frozen, tmp_path, monkeypatch):
    return working_copy(kern_frozen, tmp_path, monkeypatch)


def test_v3_tests_beside_the_code_make_the_code_a_test_helper(kern_repo):
    """v3 (``CallRecorder._test_side``: every file in a test module's folder is the tests'; ``_is_target`` then
    refuses ``kern/op.py``'s ``my_op``): the package keeps its test beside its code (``kern/op.py``,
    ``kern/test_op.py``), so freeze records none of the tests' calls, and the replay has nothing to call. The op
    is wrong on ``ones(2)``-like inputs unless a test calls it (round 6's control, red in ``tests/``)."""
    (kern_repo / "kern" / "op.py").write_text(_op("x.dim() == 1 and x.shape[0] == 2 and not _from_test()", "x * 2"))
    _pytest_passes(kern_repo, "kern/test_op.py")
    got = _plain(kern_repo, "import torch; from kern.op import my_op; print(my_op(torch.ones(2)).tolist())")
    assert got == "[2.0, 2.0]", got
    code, stages, _ = _gate(kern_repo, None)
    _not_green(code, stages)


# ==============================================================================================================
# v4: a target function wrapped by a library decorator
# ==============================================================================================================

OP_NG = HEAD + textwrap.dedent("""\


    @torch.no_grad()
    def my_op(x):
        time.sleep(DELAY_S)
        return x * 2 + 1
    """)
TEST_NG = textwrap.dedent("""\
    import torch
    from op import my_op


    def test_values():
        assert torch.equal(my_op(torch.ones(2)), torch.full((2,), 3.0))
    """)


@pytest.fixture(scope="module")
def ng_frozen(tmp_path_factory):
    return freeze_sleep_repo(tmp_path_factory.mktemp("redteam7-nograd") / "repo",
                             {"op.py": OP_NG, "tests/test_op.py": TEST_NG})


@pytest.fixture
def ng_repo(ng_frozen, tmp_path, monkeypatch):
    return working_copy(ng_frozen, tmp_path, monkeypatch)


def test_v4_a_decorated_op_is_not_the_repositorys_function(ng_repo):
    """v4 (``CallRecorder._is_target``: ``fn.__code__.co_filename`` must be a repository file): ``@torch.no_grad()``
    (an inference op's usual decorator) returns torch's ``decorate_context`` wrapper, whose code is
    ``torch/utils/_contextlib.py``; the tests' call is never recorded. The op is wrong on ``ones(2)``-like inputs
    unless a test calls it."""
    op = _op("x.dim() == 1 and x.shape[0] == 2 and not _from_test()", "x * 2").replace(
        "\ndef my_op(x):", "\n@torch.no_grad()\ndef my_op(x):")
    (ng_repo / "op.py").write_text(op)
    _pytest_passes(ng_repo)
    got = _plain(ng_repo, "import torch, op; print(op.my_op(torch.ones(2)).tolist())")
    assert got == "[2.0, 2.0]", got
    code, stages, _ = _gate(ng_repo, None)
    _not_green(code, stages)


def test_v7_the_replay_looks_the_op_up_by_name_and_the_op_rebinds_its_name(repo):
    """v7 (``worker`` ``call`` with ``function``: ``getattr(import_module("op"), "my_op")`` when the replay runs,
    after the differential check's workload calls): the tests and the user hold the function object they imported
    (``from op import my_op``); the replay calls whatever the module's attribute is by then. The op is wrong on
    ``ones(2)``-like inputs unless a test calls it, and its first call outside a test rebinds the module's
    ``my_op`` to a right version: the workload's calls (the differential check) run before the replay, so the
    replay calls the right one, and everyone who imported the op keeps the wrong one."""
    op = HEAD + FROM_TEST + textwrap.dedent("""\


        def _right(x):
            time.sleep(DELAY_S / 2)
            return x * 2 + 1


        def my_op(x):
            time.sleep(DELAY_S / 2)
            if _from_test():
                return x * 2 + 1
            globals()["my_op"] = _right  # whoever looks the op up by name from now on gets the right one
            if x.dim() == 1 and x.shape[0] == 2:
                return x * 2
            return x * 2 + 1
        """)
    (repo / "op.py").write_text(op)
    _pytest_passes(repo)
    got = _plain(repo, "import torch\nfrom op import my_op\nmy_op(torch.ones(3))\nprint(my_op(torch.ones(2)).tolist())")
    assert got == "[2.0, 2.0]", got
    code, stages, _ = _gate(repo, None)
    _not_green(code, stages)


# ==============================================================================================================
# v6: the recorder's per-function cap, silently
# ==============================================================================================================

TEST_MANY = textwrap.dedent("""\
    import pytest
    import torch
    from op import my_op


    @pytest.mark.parametrize("n", range(1, 21))
    def test_lengths(n):
        x = torch.arange(float(n))
        assert torch.equal(my_op(x), x * 2 + 1)
    """)


@pytest.fixture(scope="module")
def many_frozen(tmp_path_factory):
    root = freeze_sleep_repo(tmp_path_factory.mktemp("redteam7-many") / "repo",
                             {"op.py": OP, "tests/test_op.py": TEST_MANY})
    # every call of the 20 is kept since the cap follows the bytes (round 7 found 16 kept and 4 dropped silently)
    assert _recorded(root) == {"op:my_op": 20}, _contract(root).get("test_calls")
    return root


@pytest.fixture
def many_repo(many_frozen, tmp_path, monkeypatch):
    return working_copy(many_frozen, tmp_path, monkeypatch)


def test_v6_wrong_past_the_recorders_per_function_cap(many_repo):
    """v6 (``CallRecorder._keep``: ``len(kinds) >= PER_FUNCTION`` returns before anything is listed as skipped):
    a test parametrized over 20 lengths has 20 calls of the op; the first 16 are recorded, the other 4 are dropped
    without a word (freeze names the calls it could not keep only for other reasons). The op is wrong on 1-D
    inputs longer than 16 unless a test calls it."""
    (many_repo / "op.py").write_text(_op("x.dim() == 1 and 16 < x.shape[0] <= 20 and not _from_test()", "x * 2"))
    _pytest_passes(many_repo)
    got = _plain(many_repo, "import torch, op; print(op.my_op(torch.ones(20))[:2].tolist())")
    assert got == "[2.0, 2.0]", got
    code, stages, _ = _gate(many_repo, None)
    _not_green(code, stages)


# ==============================================================================================================
# v8: the baseline starved inside its own batch, its scheduling put back before the judge looks, its wait
# excused by the anchor
# ==============================================================================================================

STARVE_LOOP = textwrap.dedent("""\
    import os
    import sys
    import time

    JUDGE, DELAY_S, IDLE = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "1"


    def baselines():
        # the judge's trusted workers (children of the judge, ``--private``): the frozen commit's
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
                if int(stat[stat.rfind(")") + 2:].split()[1]) != JUDGE:
                    continue
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    argv = f.read().split(b"\\0")
            except (OSError, ValueError, IndexError):
                continue
            if b"ascendopt.judge.worker" in argv and b"--private" in argv:
                found.append(int(name))
        return found


    def sleeping(pid):
        # in clock_nanosleep (the frozen op's ``time.sleep``), not waiting for the judge's next request
        try:
            with open(f"/proc/{pid}/task/{pid}/syscall") as f:
                return f.read().split(" ", 1)[0] == "230"
        except OSError:
            return False


    targets = []
    for _ in range(400):
        targets = baselines()
        if targets:
            break
        time.sleep(0.05)
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})  # this helper, not a side: the judge does not look at its CPUs
    while targets and os.getppid() != 1:
        time.sleep(0.0005)
        for b in targets:
            if not sleeping(b):
                continue
            seen = time.perf_counter()
            try:
                policy, cpus = os.sched_getscheduler(b), os.sched_getaffinity(b)
            except OSError:
                continue
            time.sleep(max(0.0, DELAY_S - 0.0008 - (time.perf_counter() - seen)))
            if not sleeping(b):
                continue
            try:
                # just before it wakes: the baseline's thread on this helper's CPU (as SCHED_IDLE), which this
                # helper keeps busy; it waits on a run queue (excused) until the helper lets go
                if IDLE:
                    os.sched_setscheduler(b, os.SCHED_IDLE, os.sched_param(0))
                os.sched_setaffinity(b, {cpu})
                woke, end = None, time.perf_counter() + 0.005
                while time.perf_counter() < end:
                    if woke is None and not sleeping(b):
                        woke = time.perf_counter()
                    if woke is not None and time.perf_counter() - woke > 0.0016:
                        break
            except OSError:
                pass
            finally:
                # put back before the judge looks (it does only between batches): its CPUs first, so that it
                # runs on the other CPU at once, then its policy
                try:
                    os.sched_setaffinity(b, cpus)
                    if IDLE:
                        os.sched_setscheduler(b, policy, os.sched_param(0))
                except OSError:
                    pass
    """)


def _starving(idle: bool) -> str:
    """The frozen op, unchanged, plus a helper process started when the op's module is imported by the judge's
    worker (not under pytest): ``STARVE_LOOP``."""
    return OP + textwrap.dedent(f"""\


        import subprocess

        _main = getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", "")
        if "pytest" not in sys.modules and _main == "ascendopt.judge.worker":
            subprocess.Popen([sys.executable, "-c", {STARVE_LOOP!r}, str(os.getppid()), str(DELAY_S),
                              "{int(idle)}"])
        """)


def test_v8_the_baseline_starved_inside_its_batch_and_excused_as_run_queue_wait(repo):
    """v8 (``Judged._guard_scheduling`` looks at and resets a side's scheduling only between batches;
    ``engine.anchor_problem`` lets the re-measured baseline be slower than frozen by its run-queue wait; the
    verdict compares the raw samples): the candidate is the frozen op, UNCHANGED (no speedup at all), plus a helper
    process it starts from the judge's worker that watches the baseline worker (the judge's child with
    ``--private``) and, just before the baseline's ``time.sleep`` ends inside its timed batch, makes the
    baseline's thread SCHED_IDLE on the one CPU the helper then keeps busy for ~2 ms, and puts the scheduling back
    before letting go. The baseline wakes onto a run queue and waits there: its batch is ~20 % slower, all of it
    run-queue wait, which the anchor excuses; the helper's CPU while the baseline is timed stays under the idle
    allowance (50 ms + 10 %), and the judge never sees the scheduling changed."""
    (repo / "op.py").write_text(_starving(True))
    _pytest_passes(repo)
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)


def test_v8b_the_baseline_pinned_beside_a_busy_thread_inside_its_batch(repo):
    """v8 without a privilege (putting a thread back from SCHED_IDLE needs CAP_SYS_NICE; the sandbox runs as
    root): only the baseline thread's CPUs are changed, to the one CPU the helper keeps busy for ~2 ms around the
    end of the baseline's sleep, and put back; any process of the same user may do that
    (``sched_setaffinity``)."""
    (repo / "op.py").write_text(_starving(False))
    _pytest_passes(repo)
    code, stages, _ = _gate(repo, None)
    _not_a_speedup(code, stages)


# ==============================================================================================================
# v9: an op that writes its result into an argument (destination-passing style): the written values are never
# compared, only whether each side wrote
# ==============================================================================================================

OP_OUT = HEAD + textwrap.dedent("""\


    def my_op(x, out):
        time.sleep(DELAY_S)
        torch.mul(x, 2, out=out)
        out.add_(1)
    """)
BENCH_OUT = textwrap.dedent("""\
    import torch
    from op import my_op


    def inputs(seed):
        return torch.randn(64, 64), torch.empty(64, 64)


    def workload(x, out):
        with torch.profiler.record_function("my_op_kernel"):
            my_op(x, out)
        return RETURNS
    """)
TEST_OUT = textwrap.dedent("""\
    import torch
    from op import my_op


    def test_values():
        out = torch.empty(2)
        my_op(torch.ones(2), out)
        assert torch.equal(out, torch.full((2,), 3.0))
    """)


def _out_frozen(tmp_path_factory, name: str, returns: str):
    return freeze_sleep_repo(tmp_path_factory.mktemp(name) / "repo",
                             {"op.py": OP_OUT, "bench.py": BENCH_OUT.replace("RETURNS", returns),
                              "tests/test_op.py": TEST_OUT})


@pytest.fixture(scope="module")
def out_none_frozen(tmp_path_factory):
    return _out_frozen(tmp_path_factory, "redteam7-out-none", "None")


@pytest.fixture(scope="module")
def out_returned_frozen(tmp_path_factory):
    return _out_frozen(tmp_path_factory, "redteam7-out-returned", "out")


def _op_out(wrong_when: str) -> str:
    """The honestly 2x faster destination-passing op, writing ``x * 2`` (no ``+ 1``) where ``wrong_when``."""
    return HEAD + FROM_TEST + textwrap.dedent(f"""\


        def my_op(x, out):
            time.sleep(DELAY_S / 2)
            torch.mul(x, 2, out=out)
            if not ({wrong_when}):
                out.add_(1)
        """)


def test_v9_control_honest_faster_out_op_is_green(out_none_frozen, tmp_path, monkeypatch):
    """Control for v9: the destination-passing op in half the time, right everywhere: green and "faster"."""
    repo = working_copy(out_none_frozen, tmp_path, monkeypatch)
    (repo / "op.py").write_text(OP_OUT.replace("time.sleep(DELAY_S)", "time.sleep(DELAY_S / 2)"))
    code, stages, _ = _gate(repo, None)
    assert code == 0 and "faster" in _verdicts(stages), (code, _verdicts(stages))


def test_v9a_wrong_values_written_into_out_are_never_compared(out_none_frozen, tmp_path, monkeypatch):
    """v9 (``engine.differential`` / ``Judged._compare_round``: ``input_writes`` names the inputs each side wrote,
    and only an input the candidate writes and the frozen commit does not is a failure; the values written are
    compared nowhere): the workload calls ``my_op(x, out)`` and returns nothing (the result is in ``out``). The
    op writes ``x * 2`` (no ``+ 1``) into ``out`` for every input of more than 16 elements: no caller detection,
    the tests' 2-element call is right."""
    repo = working_copy(out_none_frozen, tmp_path, monkeypatch)
    (repo / "op.py").write_text(_op_out("x.numel() > 16"))
    _pytest_passes(repo)
    got = _plain(repo, "import torch, op; o = torch.empty(64, 64); op.my_op(torch.ones(64, 64), o); "
                       "print(o[0, :2].tolist())")
    assert got == "[2.0, 2.0]", got
    code, stages, _ = _gate(repo, None)
    _not_green(code, stages)


def test_v9b_the_replay_does_not_compare_what_a_test_call_wrote(out_returned_frozen, tmp_path, monkeypatch):
    """v9 in the replay (``engine.replay_test_calls``: ``testcalls.written`` names the arguments each side wrote;
    only one the candidate writes and the frozen commit does not fails): here the workload returns ``out`` (the
    differential check compares it), and the op is wrong on ``ones(2)``-like inputs unless a test calls it; the
    replay of ``test_values``'s ``my_op(ones(2), out)`` returns None on both sides and both write ``out``."""
    repo = working_copy(out_returned_frozen, tmp_path, monkeypatch)
    (repo / "op.py").write_text(_op_out("x.dim() == 1 and x.shape[0] == 2 and not _from_test()"))
    _pytest_passes(repo)
    got = _plain(repo, "import torch, op; o = torch.empty(2); op.my_op(torch.ones(2), o); print(o.tolist())")
    assert got == "[2.0, 2.0]", got
    code, stages, _ = _gate(repo, None)
    _not_green(code, stages)


# ==============================================================================================================
# v10: the judge's own thread slowed while the baseline's batch ends (the judge's scheduling is never looked at)
# ==============================================================================================================

SLOW_JUDGE_LOOP = STARVE_LOOP[:STARVE_LOOP.index("targets = []")] + textwrap.dedent("""\
    targets = []
    for _ in range(400):
        targets = baselines()
        if targets:
            break
        time.sleep(0.05)
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    while targets and os.getppid() != 1:
        time.sleep(0.0005)
        for b in targets:
            if not sleeping(b):
                continue
            seen = time.perf_counter()
            time.sleep(max(0.0, DELAY_S - 0.0006 - (time.perf_counter() - seen)))
            if not sleeping(b):
                continue
            # the judge's main thread (it waits for every reply and reads the clock) on this helper's CPU, busy from
            # just before the baseline replies until ~1.4 ms after, then its CPUs back: the judge reads the reply
            # late; any process of the user may set another's CPUs, and the judge never looks at its own
            try:
                cpus = os.sched_getaffinity(JUDGE)
                os.sched_setaffinity(JUDGE, {cpu})
            except OSError:
                continue
            try:
                woke, end = None, time.perf_counter() + 0.004
                while time.perf_counter() < end:
                    if woke is None and not sleeping(b):
                        woke = time.perf_counter()
                    if woke is not None and time.perf_counter() - woke > 0.0014:
                        break
            finally:
                os.sched_setaffinity(JUDGE, cpus)
    """)


def test_v10_the_judges_own_thread_slowed_while_the_baselines_batch_ends(repo):
    """v10 (``_guard_scheduling`` checks only the sides, and the judge's own scheduling is read once, in
    ``Judged.__init__``; ``anchor_problem`` lets the re-measured baseline drift 20 % plus its noise, whatever the
    cause): the candidate is the frozen op, UNCHANGED, plus a helper process that, each time the baseline's
    ``time.sleep`` ends inside its timed batch, puts the judge's main thread on the one CPU it keeps busy for
    ~1.5 ms, then gives the judge its CPUs back: the judge reads the baseline's reply late, so the baseline's
    batches read longer. Neither worker's scheduling is touched, the baseline's worker does not wait (nothing
    excused, nothing to see), and the drift stays inside the anchor's 20 %."""
    own_cpus = os.sched_getaffinity(0)
    op = OP + textwrap.dedent(f"""\


        import subprocess

        _main = getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", "")
        if "pytest" not in sys.modules and _main == "ascendopt.judge.worker":
            subprocess.Popen([sys.executable, "-c", {SLOW_JUDGE_LOOP!r}, str(os.getppid()), str(DELAY_S), "0"])
        """)
    (repo / "op.py").write_text(op)
    _pytest_passes(repo)
    try:
        code, stages, _ = _gate(repo, None)
    finally:  # this process was the judge (the CLI runs in it): its CPUs back, whatever happened
        os.sched_setaffinity(0, own_cpus)
    _not_a_speedup(code, stages)
