"""Build profiler-file variants by transforming the REAL fixture files in tests/data/ascend/.

Every variant here starts from the bytes of a real file (see tests/data/ascend/README.md) and
applies one documented change (docs/profiler-formats.md §4.2 / §4.5 / §5): a header
rename, a column dropped or added, a cell replaced. No row is made up.
"""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Callable
from pathlib import Path

ASCEND = Path(__file__).resolve().parent / "data" / "ascend"
CUDA = Path(__file__).resolve().parent / "data" / "cuda"
LEVEL1 = ASCEND / "level1_cnn" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
LEVEL0 = ASCEND / "level0_cnn" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
ADVISOR = ASCEND / "advisor_pipe" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
MEMORY_L0 = ASCEND / "memory_l0" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
OP_SUMMARY = ASCEND / "msprof_op_summary" / "mindstudio_profiler_output" / "op_summary_20260605161737.csv"


def read_rows(path: Path) -> tuple[list[list[str]], str]:
    """Rows of a real CSV (csv module, cells unquoted) and its line ending."""
    raw = path.read_bytes()
    ending = "\r\n" if b"\r\n" in raw else "\n"
    return list(csv.reader(io.StringIO(raw.decode("utf-8"), newline=""))), ending


def write_rows(path: Path, rows: list[list[str]], ending: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator=ending).writerows(rows)
    path.write_bytes(buf.getvalue().encode("utf-8"))
    return path


def derive(src: Path, dest_dir: Path, change: Callable[[list[list[str]]], list[list[str]]],
           name: str = "kernel_details.csv") -> Path:
    """A run folder ``dest_dir/ASCEND_PROFILER_OUTPUT/name`` holding ``change(rows of src)``."""
    rows, ending = read_rows(src)
    return write_rows(dest_dir / "ASCEND_PROFILER_OUTPUT" / name, change(rows), ending)


def rename(mapping: dict[str, str]) -> Callable[[list[list[str]]], list[list[str]]]:
    return lambda rows: [[mapping.get(h, h) for h in rows[0]], *rows[1:]]


def drop(*names: str) -> Callable[[list[list[str]]], list[list[str]]]:
    def change(rows):
        keep = [i for i, h in enumerate(rows[0]) if h not in names]
        return [[r[i] for i in keep] for r in rows]
    return change


def insert_column(name: str, value: str, at: int = 0) -> Callable[[list[list[str]]], list[list[str]]]:
    return lambda rows: [rows[0][:at] + [name] + rows[0][at:]] + [r[:at] + [value] + r[at:] for r in rows[1:]]


def set_cell(row: int, column: str, value: str) -> Callable[[list[list[str]]], list[list[str]]]:
    def change(rows):
        out = [list(r) for r in rows]
        out[row][rows[0].index(column)] = value
        return out
    return change


def reverse_columns(rows: list[list[str]]) -> list[list[str]]:
    return [list(reversed(r)) for r in rows]


def copy_fixture(name: str, dest: Path) -> Path:
    shutil.copytree(ASCEND / name, dest)
    return dest
