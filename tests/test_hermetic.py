"""The suite is hermetic: a triton-ascend environment in the user's cache (which any `ascendopt precheck`
builds), or one named by $ASCENDOPT_ASCEND_PYTHON, changes no test's result (tests/conftest.py)."""

import json
import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

from ascendopt.device.ascend_env import ASCEND_PINS, ENV_MARKER

TESTS = Path(__file__).resolve().parent

# An interpreter that, if anything ran it, would leave a mark and change the verdict: the probe sees
# "triton-ascend 3.2.0", and every compile answers that the first launch does not lower.
FAKE_PYTHON = """#!/bin/sh
echo "$0 $*" >> "{marker}"
out=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--out" ]; then out="$2"; fi
  shift
done
if [ -n "$out" ]; then
  echo '{result}' > "$out"
else
  echo 3.2.0
fi
"""
FAILING_RESULT = {"triton": "3.2.0", "arch": "Ascend910B2", "python": "fake", "problems": [], "other_launches": 0,
                  "launches": [{"kernel": "k", "status": "failed", "error": "fake: does not lower"}]}


def _fake_env(cache: Path, marker: Path) -> Path:
    """A complete managed environment (marker with today's pins) under ``cache``/ascend-venv; its python."""
    venv = cache / "ascend-venv"
    python = venv / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON.format(marker=marker, result=json.dumps(FAILING_RESULT)))
    python.chmod(python.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (venv / ENV_MARKER).write_text(json.dumps({"pins": list(ASCEND_PINS)}))
    return python


def test_a_triton_ascend_environment_of_the_user_changes_no_test(tmp_path):
    """Freeze of own code that launches no Triton kernel, the precheck's "no environment" paths, the managed
    environment's look-up: run in a child pytest whose HOME, XDG cache, $ASCENDOPT_CACHE and
    $ASCENDOPT_ASCEND_PYTHON all hold a ready fake environment. They pass, and the fake never ran."""
    marker = tmp_path / "fake-python-ran"
    home = tmp_path / "home"
    python = _fake_env(home / ".cache" / "ascendopt", marker)
    _fake_env(tmp_path / "xdg" / "ascendopt", marker)
    _fake_env(tmp_path / "explicit-cache", marker)
    # control: the fake is a working interpreter stand-in that the tool would use and believe
    from ascendopt.device import ascend_env

    env = dict(os.environ, HOME=str(home), XDG_CACHE_HOME=str(tmp_path / "xdg"),
               ASCENDOPT_CACHE=str(tmp_path / "explicit-cache"), ASCENDOPT_ASCEND_PYTHON=str(python))
    for name in ("ASCENDOPT_TEST_ASCEND_PYTHON", "CI"):  # a developer's run: tests that need a real one skip
        env.pop(name, None)
    probe = subprocess.run([sys.executable, "-c", "from ascendopt.device import ascend_env as e; "
                            "print(e.find_python(install=False), e.probe(e.find_python(install=False)))"],
                           env=env, capture_output=True, text=True, timeout=120, check=False)
    assert probe.returncode == 0 and probe.stdout.split() == [str(python), "3.2.0"], probe.stderr
    assert marker.exists() and ascend_env  # the fake runs when the tool is pointed at it
    marker.unlink()

    tests = ["tests/freeze/test_freeze.py::test_freeze_own_code_pins_files_and_commit",
             "tests/lint/test_precheck.py::test_loop_precheck_never_installs",
             "tests/device/test_ascend_env.py",
             "tests/cli/test_precheck_cli.py::test_an_explicit_interpreter_that_does_not_exist_is_one_line_exit_2",
             "tests/test_hermetic.py::test_each_test_has_its_own_cache"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *tests],
                          cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " failed" not in proc.stdout and " error" not in proc.stdout
    assert not marker.exists(), f"the user's triton-ascend environment was run: {marker.read_text()}"


def test_each_test_has_its_own_cache():
    """Inside the suite: the cache is under the suite's own temporary folders, never HOME's."""
    from ascendopt.device import ascend_env

    cache = ascend_env.cache_dir()
    assert os.environ["ASCENDOPT_CACHE"] == str(cache) and not cache.exists()
    assert "ASCENDOPT_ASCEND_PYTHON" not in os.environ
    assert ascend_env.find_python(install=False) is None
    assert Path.home() != Path(pwd.getpwuid(os.getuid()).pw_dir)  # the suite's own HOME
