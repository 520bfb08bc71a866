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


def _duplicate_header(tmp_path):
    """Synthetic damage of the real level1 file: 'Wait Time(us)' renamed to a second 'Duration(us)'."""
    def dup(rows):
        rows[0] = ["Duration(us)" if h == "Wait Time(us)" else h for h in rows[0]]
        return rows
    return derive(LEVEL1, tmp_path / "run", dup), "column 'Duration(us)' appears twice in the header"


def _undecodable_bytes(tmp_path):
    """Synthetic damage of the real level1 file: bytes that are not UTF-8 inside a kernel name (row 6)."""
    raw = LEVEL1.read_bytes().split(b"\r\n")
    raw[6] = raw[6].replace(b"aclnn", b"acl\xff\xfenn", 1)
    assert b"\xff" in raw[6]
    path = _kd(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\r\n".join(raw))
    return path, "invalid UTF8"


def _no_valid_duration(tmp_path):
    rows, ending = read_rows(LEVEL1)
    i = rows[0].index("Duration(us)")
    for r in rows[1:]:
        r[i] = "-1"
    return write_rows(_kd(tmp_path), rows, ending), "no row has a valid duration"


@pytest.mark.parametrize("make", [_empty, _header_only, _no_name, _no_duration, _binary, _latin1, _no_profile,
                                  _missing_path, _duplicate_header, _undecodable_bytes, _no_valid_duration],
                         ids=lambda f: f.__name__.strip("_"))
def test_bad_input_exits_2_with_one_line_naming_the_file(cli, tmp_path, make):
    path, problem = make(tmp_path)
    target = path.parent.parent if path.name == "kernel_details.csv" else path
    code, out, err = cli("analyze", str(target))
    assert code == 2, err
    assert out == ""
    assert err.strip().count("\n") == 0, err
    assert "Traceback" not in err
    assert str(path) in err and problem in err


# -- issue 21: invalid numbers and ragged rows are read, counted and reported once -------------------------
# Every file below is the real level1 fixture with damage done here (synthetic damage, not a real capture).

def _valid_durations(rows, bad_rows):
    i = rows[0].index("Duration(us)")
    core = rows[0].index("Accelerator Core")
    return sum(float(r[i]) for n, r in enumerate(rows[1:], 1) if n not in bad_rows and r[core] != "HCCL")


def test_invalid_numbers_are_counted_excluded_and_reported_once(cli, tmp_path):
    from _cli_json import json_payload

    damage = {1: "-5", 2: "inf", 3: "nan", 4: "12,5us"}
    change = None
    for row, value in damage.items():
        step = set_cell(row, "Duration(us)", value)
        change = step if change is None else (lambda a, b: (lambda rows: b(a(rows))))(change, step)
    more = set_cell(7, "aiv_vec_ratio", "-0.5")
    path = derive(LEVEL1, tmp_path / "run", lambda rows: more(change(rows)))
    rows, _ = read_rows(path)
    code, out, err = cli("analyze", str(path.parent.parent), "-n", "3")
    assert code == 0 and "Traceback" not in err and "Warning" not in err
    assert "inf us" not in out and "nan%" not in out and "nan us" not in out
    notes = [line for line in err.splitlines() if "invalid numeric" in line]
    assert len(notes) == 1
    assert "Duration(us): 1 inf, 1 negative, 1 nan, 1 text" in notes[0] and "aiv_vec_ratio: 1 negative" in notes[0]
    assert err.count("4 row(s) without a valid duration excluded") == 1
    code, out, _ = cli("analyze", str(path.parent.parent), "--json")
    report = json_payload(out)
    assert report["total_us"]["npu:0"] == pytest.approx(_valid_durations(rows, set(damage)))


def test_rows_longer_than_the_header_are_skipped_and_counted(cli, tmp_path):
    rows, ending = read_rows(LEVEL1)
    rows[3] = rows[3] + ["extra", "cells"]
    rows[9] = rows[9] + ["x"]
    path = write_rows(_kd(tmp_path), rows, ending)
    code, out, err = cli("analyze", str(path.parent.parent), "-n", "3")
    assert code == 0 and "Traceback" not in err
    assert err.count("skipped 2 row(s) whose field count differs") == 1
    from _cli_json import json_payload

    report = json_payload(cli("analyze", str(path.parent.parent), "--json")[1])
    assert report["total_us"]["npu:0"] == pytest.approx(_valid_durations(rows, {3, 9}))
