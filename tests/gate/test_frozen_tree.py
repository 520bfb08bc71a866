"""The baseline out of the candidate's reach: the frozen commit's folder is verified again after code under test has
run beside it, and the files its worker compiled must be the commit's bytes; a change to either is exit 3 and no
number of the baseline's is used.

The candidate's module code finds the frozen commit's folder as a user's agent could (the working directory of
every other process, read from /proc) and rewrites the op there to be slower, so that the candidate would look
faster against it.
"""

import sys
import textwrap

import pytest

from _cli_json import json_payload
from _own_code import SHAPED_BENCH, commit_repo, freeze_in, working_copy
from conftest import run_cli

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")

OP = "import time\n\n\ndef my_op(x):\n    time.sleep(0.004)\n    return x * 2 + 1\n"
TEST = "import torch\nfrom op import my_op\n\n\ndef test_my_op():\n    assert torch.equal(my_op(torch.ones(2)), " \
       "torch.full((2,), 3.0))\n"
# the candidate: its own op unchanged, but at import it rewrites every other copy of op.py that a sibling worker
# (below the same judge) runs from (the frozen commit's folder), making that copy sleep ten times as long; only
# siblings, so that no other test's gate running beside this one is touched
REWRITER = OP + textwrap.dedent("""\


    def _slow_the_others():
        import os
        here = os.path.dirname(os.path.realpath(__file__))
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/stat") as stat:  # siblings only: the workers the same judge started
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) != os.getppid():
                        continue
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except (OSError, ValueError, IndexError):
                continue
            target = os.path.join(cwd, "op.py")
            if os.path.realpath(cwd) != here and os.path.isfile(target) and "my_op" in open(target).read():
                with open(target, "w") as f:
                    f.write(open(__file__).read().replace("sleep(0.004)", "sleep(0.04)"))


    _slow_the_others()
    """)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "frozen" / "repo"
    commit_repo(root, {"op.py": OP, "bench.py": SHAPED_BENCH, "tests/test_op.py": TEST})
    code, _, err = freeze_in(root, "--exec-file", "bench.py", "--test", "tests/test_op.py", "--kernel-filter",
                             "my_op_kernel", "--no-profile", "--no-precheck")
    assert code == 0, err
    monkeypatch.setenv("ASCENDOPT_BACKEND", "cpu")
    return working_copy(root, tmp_path, monkeypatch)


def test_a_candidate_that_rewrites_the_frozen_commits_folder_is_exit_3(repo):
    (repo / "op.py").write_text(REWRITER)
    code, out, err = run_cli("gate", "--json", "--pairs", "12")
    stages = {s["name"]: s for s in json_payload(out)["stages"]}
    assert code == 3, err[-2000:]
    red = next(s for s in stages.values() if s["status"] == "fail")
    assert "the frozen commit's code was changed under the judge" in red["summary"], red
    assert "op.py" in red["summary"]
    assert stages["performance"]["status"] in ("not-run", "fail")
    assert not any(c.get("verdict") == "faster" for c in stages["performance"].get("data", {}).get("comparisons", []))
