import multiprocessing as mp
import os
import signal
import time

import pytest

from ascendopt.errors import ContractError
from ascendopt.workspace import LockHeld, Workspace, atomic_write_text, read_yaml, write_yaml


def test_yaml_roundtrip_carries_schema(tmp_path):
    p = tmp_path / "c.yaml"
    write_yaml(p, {"op": "rms_norm", "n": 3})
    data = read_yaml(p)
    assert data == {"schema": 1, "op": "rms_norm", "n": 3}


def test_wrong_schema_and_bad_yaml_name_the_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("schema: 7\n")
    with pytest.raises(ContractError, match=r"c.yaml: schema: expected 1, found 7"):
        read_yaml(p)
    p.write_text("a: [1, 2\n")
    with pytest.raises(ContractError, match=r"c.yaml: not valid YAML at line"):
        read_yaml(p)


def _slow_writer(path: str) -> None:
    # Simulates a command killed mid-write: the writer is SIGKILLed while the temp file is open.
    import ascendopt.workspace as ws

    real_fsync = os.fsync

    def hang(fd):
        time.sleep(60)
        real_fsync(fd)

    ws.os.fsync = hang
    ws.atomic_write_text(path, "new: content\n" * 1000)


def test_killed_write_leaves_previous_file_intact(tmp_path):
    p = tmp_path / "contract.yaml"
    atomic_write_text(p, "old: content\n")
    proc = mp.get_context("fork").Process(target=_slow_writer, args=(str(p),))
    proc.start()
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert p.read_text() == "old: content\n"


def _hold_lock(root: str, ready, release) -> None:
    with Workspace(root=__import__("pathlib").Path(root)).lock():
        ready.set()
        release.wait(10)


def test_lock_excludes_a_second_writer(tmp_path):
    ctx = mp.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_lock, args=(str(tmp_path), ready, release))
    proc.start()
    assert ready.wait(10)
    with pytest.raises(LockHeld, match="locked by pid"):
        with Workspace(root=tmp_path).lock():
            pass
    release.set()
    proc.join()
    with Workspace(root=tmp_path).lock():  # free again
        pass


def test_round_numbers(tmp_path):
    ws = Workspace(root=tmp_path)
    write_yaml(ws.round_path(2), {"number": 2})
    write_yaml(ws.round_path(1), {"number": 1})
    assert ws.round_numbers() == [1, 2]
