"""How the workspace writes files: with the umask's mode (not ``mkstemp``'s 0600), keeping the mode of a file it
replaces, and every refusal of the file system as one error naming the path (exit 2, a full disk exit 5) that
leaves the previous file as it was. Real files, real folders, a real full device (``/dev/full``)."""

import errno
import os
from pathlib import Path

import pytest

from ascendopt.errors import ExitCode, IntegrityError
from ascendopt.workspace import (
    NoSpace,
    Workspace,
    WriteFailed,
    atomic_write_text,
    check_output_folder,
    check_output_path,
    writing,
)


@pytest.fixture
def umask():
    """Set the process umask for one test (restored after)."""
    previous = os.umask(0o022)
    yield os.umask
    os.umask(previous)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_umask_mode(tmp_path, umask, mask, expected):
    umask(mask)
    target = tmp_path / "contract.yaml"
    atomic_write_text(target, "schema: 1\n")
    assert _mode(target) == expected
    # what open() gives under the same umask: an atomic write is no less readable than a plain one
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert _mode(plain) == expected


def test_a_replaced_file_keeps_its_mode(tmp_path, umask):
    umask(0o022)
    target = tmp_path / "rounds" / "0001.yaml"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n" and _mode(target) == 0o640


def test_write_refusals_name_the_target_and_keep_the_previous_file(tmp_path):
    folder = tmp_path / "report.md"
    folder.mkdir()
    with pytest.raises(WriteFailed) as info:
        atomic_write_text(folder, "text")
    assert str(info.value) == f"{folder}: cannot write (is a directory)" and info.value.exit_code == ExitCode.USAGE
    assert folder.is_dir() and list(folder.iterdir()) == []  # no temp file left behind

    a_file = tmp_path / "plain"
    a_file.write_text("keep\n")
    with pytest.raises(WriteFailed) as info:
        atomic_write_text(a_file / "x.yaml", "text")
    assert str(info.value).startswith(f"{a_file / 'x.yaml'}: cannot write (") and a_file.read_text() == "keep\n"


def test_a_full_disk_is_an_environment_error_naming_the_file():
    with pytest.raises(NoSpace) as info, writing("/dev/full"), open("/dev/full", "w") as fh:
        fh.write("x" * 10)
        fh.flush()
    assert str(info.value) == "/dev/full: cannot write (no space left on device)"
    assert info.value.exit_code == ExitCode.ENVIRONMENT


def test_writing_leaves_other_errors_alone(tmp_path):
    with pytest.raises(FileNotFoundError), writing(tmp_path / "x"):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(tmp_path / "y"))


def test_output_paths_are_checked_without_leaving_anything(tmp_path):
    with pytest.raises(WriteFailed, match=r": is a directory \(--junit needs a file path\)$"):
        check_output_path(tmp_path, "--junit")
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(WriteFailed, match=r"f/deep/out.xml: cannot write \(.*f is not a directory\)$"):
        check_output_path(a_file / "deep" / "out.xml", "--junit")
    with pytest.raises(WriteFailed, match=r"f: not a directory \(--out-dir needs a folder\)$"):
        check_output_folder(a_file, "--out-dir")
    # controls: a new file in a new folder, and a folder to create, pass and create nothing
    assert check_output_path(tmp_path / "new" / "junit.xml", "--junit") == tmp_path / "new" / "junit.xml"
    check_output_folder(tmp_path / "profiles" / "x", "--out-dir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_damaged_ledger_is_refused_before_anything_is_archived(tmp_path):
    ws = Workspace(tmp_path / ".ascendopt")
    (ws.root / "contract.yaml").mkdir(parents=True)
    with pytest.raises(IntegrityError, match=r"contract.yaml: is a directory, not a file"):
        ws.check_writable()
    with pytest.raises(IntegrityError):
        ws.archive_ledger()
    assert not ws.archive_dir.exists()


def test_reading_the_lock_state_never_creates_the_lock(tmp_path):
    ws = Workspace(tmp_path / ".ascendopt")
    ws.root.mkdir()
    assert ws.held_elsewhere() is False and ws.killed_holder() is None
    assert not ws.lock_path.exists()  # a reader leaves no lock file behind (a read-only workspace has none to make)
    with ws.lock():
        pass
    ws.lock_path.chmod(0o444)  # a lock file this user may not write: readers still tell whether it is held
    assert ws.held_elsewhere() is False
