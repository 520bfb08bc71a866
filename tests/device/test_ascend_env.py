"""Finding the triton-ascend environment, refusing one that is not, and the pins CI builds with."""

import json
import re
import sys
from pathlib import Path

import pytest

from ascendopt.device import ascend_env
from ascendopt.errors import EnvironmentProblem, ExitCode

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCENDOPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ASCENDOPT_ASCEND_PYTHON", raising=False)
    return tmp_path / "cache"


def test_ci_builds_the_same_pins():
    """.ci/run's triton-ascend venv and the managed one must not drift apart."""
    text = (REPO / ".ci" / "run").read_text()
    line = next(ln for ln in text.splitlines() if "triton-ascend==" in ln and "pip" in ln and "install" in ln)
    quoted = re.findall(r"\"([^\"]+)\"|'([^']+)'|(\S+)", line.split("install", 1)[1])
    pins = [next(p for p in group if p) for group in quoted]
    assert [p for p in pins if not p.startswith("-")] == list(ascend_env.ASCEND_PINS)


def test_no_environment_and_no_install_gives_none(empty_cache):
    assert ascend_env.find_python(None, install=False) is None
    assert not ascend_env.managed_env_ready()


def test_managed_env_needs_the_marker_with_todays_pins(empty_cache):
    env = ascend_env.managed_env()
    assert env == empty_cache / "ascend-venv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    assert not ascend_env.managed_env_ready()  # no marker: a half-built environment
    (env / ascend_env.ENV_MARKER).write_text('{"pins": ["triton-ascend==3.1.0"]}')
    assert not ascend_env.managed_env_ready()  # other pins: stale
    (env / ascend_env.ENV_MARKER).write_text(json.dumps({"pins": list(ascend_env.ASCEND_PINS)}))
    assert ascend_env.managed_env_ready()
    assert ascend_env.find_python(None) == env / "bin" / "python"


def test_explicit_python_wins_and_must_exist(empty_cache, monkeypatch, tmp_path):
    assert ascend_env.find_python(sys.executable) == Path(sys.executable)
    with pytest.raises(EnvironmentProblem, match="--ascend-python .*no such interpreter"):
        ascend_env.find_python(str(tmp_path / "nope" / "python"))
    monkeypatch.setenv("ASCENDOPT_ASCEND_PYTHON", str(tmp_path / "gone"))
    with pytest.raises(EnvironmentProblem, match=r"\$ASCENDOPT_ASCEND_PYTHON"):
        ascend_env.find_python(None)


def test_upstream_triton_is_refused():
    """This test environment's triton is upstream triton: the probe must say so (exit 5), in one line."""
    with pytest.raises(EnvironmentProblem) as info:
        ascend_env.probe(sys.executable)
    assert info.value.exit_code == ExitCode.ENVIRONMENT
    assert "not triton-ascend" in str(info.value) and "\n" not in str(info.value)


def test_child_in_a_non_ascend_python_reports_environment(tmp_path):
    kernel = tmp_path / "k.py"
    kernel.write_text("x = 1\n")
    request = {"target": str(kernel), "exec_file": None, "launches": [], "cache_dir": str(tmp_path / "c")}
    with pytest.raises(EnvironmentProblem, match="not triton-ascend"):
        ascend_env.run_child(Path(sys.executable), request, timeout=120)


def test_child_runs_isolated_from_pythonpath(monkeypatch):
    """The child gets no PYTHON* variables (and runs with -I): ascendopt's path cannot leak upstream triton."""
    monkeypatch.setenv("PYTHONPATH", "/somewhere/site-packages")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    env = ascend_env._child_env()
    assert "PYTHONPATH" not in env and "TRITON_INTERPRET" not in env
    assert env["PYTHONNOUSERSITE"] == "1"


def test_failed_build_reports_the_step_and_leaves_nothing(empty_cache, monkeypatch):
    """A step that fails (here: creating the venv with an interpreter that exits 1) names the step, removes the
    half-built environment and reported its progress before failing."""
    monkeypatch.setattr(ascend_env.sys, "executable", "/bin/false")
    steps = []
    with pytest.raises(EnvironmentProblem, match="create the virtual environment failed") as info:
        ascend_env.find_python(None, install=True, on_step=lambda text, done, total: steps.append((text, done, total)))
    assert info.value.exit_code == ExitCode.ENVIRONMENT
    assert steps == [("create the virtual environment", 0, len(ascend_env.ASCEND_PINS) + 1)]
    assert not ascend_env.managed_env().exists()
