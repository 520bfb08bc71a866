"""Bad inputs to `ascendopt analyze`: exit 2, one line on stderr naming the file and the problem,
no traceback, nothing on stdout. Broken files are made from the real level1 fixture.
"""

import pytest

from profile_variants import LEVEL1, derive, drop, read_rows, set_cell, write_rows


def _kd(tmp_path):
    return tmp_path / "run" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"


def _empty(tmp_path):
    path = _kd(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    return path, "empty file"


def _header_only(tmp_path):
    rows, ending = read_rows(LEVEL1)
    return write_rows(_kd(tmp_path), rows[:1], ending), "header only"


def _no_name(tmp_path):
    return derive(LEVEL1, tmp_path / "run", drop("Name")), "missing column 'Name' or 'Op Name'"


def _no_duration(tmp_path):
    return derive(LEVEL1, tmp_path / "run", drop("Duration(us)")), "missing column 'Duration(us)'"


def _non_numeric(tmp_path):
    return derive(LEVEL1, tmp_path / "run", set_cell(5, "Duration(us)", "12,5us")), \
        "column 'Duration(us)' has a non-numeric value '12,5us' (data row 5)"


def _binary(tmp_path):
    path = _kd(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(bytes(range(256)) * 64)
    return path, "binary data"


def _latin1(tmp_path):
    path = _kd(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(bytes(range(128, 256)) * 8 + b"\n")
    return path, "not UTF-8 text"


def _no_profile(tmp_path):
    folder = tmp_path / "nothing_here"
    folder.mkdir()
    (folder / "notes.txt").write_text("no profile\n")
    return folder, "no profile found"


def _missing_path(tmp_path):
    return tmp_path / "does_not_exist", "no such file or folder"


@pytest.mark.parametrize("make", [_empty, _header_only, _no_name, _no_duration, _non_numeric, _binary, _latin1,
                                  _no_profile, _missing_path], ids=lambda f: f.__name__.strip("_"))
def test_bad_input_exits_2_with_one_line_naming_the_file(cli, tmp_path, make):
    path, problem = make(tmp_path)
    target = path.parent.parent if path.name == "kernel_details.csv" else path
    code, out, err = cli("analyze", str(target))
    assert code == 2, err
    assert out == ""
    assert err.strip().count("\n") == 0, err
    assert "Traceback" not in err
    assert str(path) in err and problem in err
