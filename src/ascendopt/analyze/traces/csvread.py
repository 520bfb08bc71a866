"""Fast, strict CSV reading for profiler tables (pyarrow), by column NAME, never by position.

Profiler CSVs are big (a long training step gives 10^5-10^6 rows) and quirky
(docs/profiler-formats.md §4.5): a TAB after the start time, quoted cells, ``N/A`` /
``NA`` / empty for "not collected", CRLF, no final newline, ragged rows, a trailing comma that
makes an empty-named column. ``read_columns`` reads only the columns asked for, turns every
"missing" marker into NaN (never 0), and raises ``ProfileError`` naming the file for anything
it cannot read.
"""

from __future__ import annotations

import contextlib
import csv
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from ascendopt.analyze.traces.faults import reader
from ascendopt.errors import ProfileError

NULL_MARKERS = ["N/A", "NA", "", "n/a", "-"]
_HEAD_BYTES = 1 << 16
# Bytes sampled to find numeric columns with quirks: read directly rather than with pyarrow's streaming
# reader, which reads blocks ahead on its threads while only the first is wanted.
_SAMPLE_BYTES = 1 << 20
# pyarrow parses a CSV in blocks (1 MiB by default), one chunk per block in every column; joining hundreds of
# chunks into pandas columns (dictionary columns: unifying each chunk's dictionary) cost a 450 MiB capture
# ~1 s of CPU, 4 MiB blocks about half, while still leaving a block per thread on any machine.
_BLOCK_BYTES = 4 << 20


@reader
def read_header(path: Path) -> list[str]:
    """The header row's names, stripped. Raises ProfileError for empty, binary or header-less files."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not head.strip():
        raise ProfileError(f"{path}: empty file", hint="re-run the profiler; the export did not finish")
    if b"\x00" in head:
        raise ProfileError(f"{path}: binary data, not a CSV text file")
    first = re.split(b"\r\n|\r|\n", head, maxsplit=1)[0]  # any line end: CRLF, LF, a lone CR
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ProfileError(f"{path}: not UTF-8 text, not a CSV file") from None
    names = next(csv.reader([text]), [])
    names = [n.strip() for n in names]
    if not any(names):
        raise ProfileError(f"{path}: first line is not a CSV header")
    return names


@reader
def read_columns(path: Path, wanted: dict[str, str], text: set[str], *, skip_lines: int = 0):
    """Read the raw columns ``wanted`` (raw name -> canonical name) into a pandas DataFrame.

    ``text``: canonical names to keep as strings (read dictionary-encoded, i.e. categorical);
    every other column is float64 with NaN for N/A / NA / empty cells. ``skip_lines`` skips
    lines before the header (ncu's ``==PROF==`` lines).
    Returns ``(frame, notes)``; notes are warnings such as skipped ragged rows.
    Invalid numeric cells -- text, ``nan``, ``inf``, negative numbers (no profiler column is negative) -- are
    counted, read as missing (NaN) and reported in one note; the caller decides what a row without a
    valid duration means. Raises ProfileError when the file holds no data rows or cannot be parsed.
    """
    import pyarrow as pa

    numeric = [raw for raw, canon in wanted.items() if canon not in text]
    # Fast path: numbers parsed by pyarrow directly; only columns whose first rows carry quirks
    # (TAB after the start time, quotes) go through strings. A quirk further down the file makes
    # the fast read fail; then every numeric column takes the string path.
    as_string = set(_quirky_columns(path, numeric, skip_lines))
    try:
        table, notes = _read(path, wanted, text, as_string, skip_lines)
    except _ConversionFailed:
        table, notes = _read(path, wanted, text, set(numeric), skip_lines)
    if table.num_rows == 0:
        raise ProfileError(f"{path}: header only, no data rows", hint="the profiled step ran no device tasks")
    columns, names = [], []
    nulls: dict[str, int] = {}  # canonical numeric column -> its null (N/A, empty) cells, before they read NaN
    unparsed: dict[str, dict[str, int]] = {}
    for raw, canon in wanted.items():
        col = table.column(raw)
        if canon not in text:
            if raw in as_string or col.type == pa.string():
                col, unparsed[raw] = _to_float(col)
            nulls[canon] = col.null_count
        columns.append(col)
        names.append(canon)
    del table
    # Arrow joins each column's blocks into one numpy array (nulls -> NaN) on its threads; the checks
    # below are numpy reductions over those arrays (Arrow's, block by block, took several times longer)
    frame = pa.table(columns, names=names).to_pandas(split_blocks=True, self_destruct=True)
    del columns
    invalid: dict[str, dict[str, int]] = {}
    for raw, canon in wanted.items():
        if canon in text:
            continue
        fixed, counts = _invalid_to_nan(frame[canon].to_numpy(), nulls[canon])
        if fixed is not None:
            frame[canon] = fixed
        for kind, n in unparsed.get(raw, {}).items():
            counts[kind] = counts.get(kind, 0) + n
        if counts:
            invalid[raw] = counts
    if invalid:
        total = sum(sum(c.values()) for c in invalid.values())
        detail = "; ".join(f"{raw}: " + ", ".join(f"{n} {kind}" for kind, n in counts.items())
                           for raw, counts in list(invalid.items())[:6])
        notes.append(f"{path.name}: {total} invalid numeric cell(s) read as missing ({detail}"
                     + ("; ..." if len(invalid) > 6 else "") + ")")
    return frame, notes


class _ConversionFailed(Exception):
    pass


@contextlib.contextmanager
def _row_handler_errors() -> Iterator[list[BaseException]]:
    """Collect, instead of printing, what pyarrow could not pass to an ``invalid_row_handler``.

    pyarrow decodes a malformed row's text before calling the handler; a row that is not UTF-8 makes that
    fail inside pyarrow, which reports it through ``sys.unraisablehook`` (a traceback on stderr, "Exception
    ignored in ...") and then fails the read. The errors are kept here so the read's ProfileError can say
    what was wrong, and nothing else reaches the user.
    """
    caught: list[BaseException] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: caught.append(unraisable.exc_value)
    try:
        yield caught
    finally:
        sys.unraisablehook = previous


def _read(path: Path, wanted: dict[str, str], text: set[str], as_string: set[str], skip_lines: int):
    import pyarrow as pa
    from pyarrow import csv as pacsv

    ragged: list[str] = []

    def on_invalid(row) -> str:
        # A row with a different field count: its later cells would be shifted. Skip it, say so.
        ragged.append(f"line {row.number}" if row.number is not None else repr(row.text[:40]))
        return "skip"

    types = {}
    for raw, canon in wanted.items():
        if canon in text:
            types[raw] = pa.dictionary(pa.int32(), pa.string())
        else:
            types[raw] = pa.string() if raw in as_string else pa.float64()
    try:
        with _row_handler_errors() as unpassed:
            table = pacsv.read_csv(
                path,
                read_options=pacsv.ReadOptions(skip_rows=skip_lines, block_size=_BLOCK_BYTES),
                parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid, newlines_in_values=False),
                convert_options=pacsv.ConvertOptions(
                    include_columns=list(wanted), column_types=types, null_values=NULL_MARKERS,
                    strings_can_be_null=True, quoted_strings_can_be_null=True,
                ),
            )
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError) as exc:
        msg = str(exc).splitlines()[0][:160]
        if "conversion error to double" in msg and any(t == pa.float64() for t in types.values()):
            raise _ConversionFailed() from None
        if unpassed:
            msg += f"; a malformed row is not UTF-8 text ({type(unpassed[0]).__name__}: {unpassed[0]})"[:200]
        raise ProfileError(f"{path}: cannot parse as CSV ({msg})") from None
    notes = []
    if ragged:
        notes.append(f"{path.name}: skipped {len(ragged)} row(s) whose field count differs from the header "
                     f"({', '.join(ragged[:3])}); their cells would be shifted")
    return table, notes


def _quirky_columns(path: Path, numeric: list[str], skip_lines: int) -> list[str]:
    """Numeric columns whose cells in the first 1 MiB do not parse as plain numbers."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv as pacsv

    if not numeric:
        return []
    options = _sample_options(numeric, skip_lines)
    try:
        with _row_handler_errors():
            with open(path, "rb") as f:
                head = f.read(_SAMPLE_BYTES + 1)
            cut = max(head.rfind(b"\n"), head.rfind(b"\r")) if len(head) > _SAMPLE_BYTES else len(head) - 1
            if cut > 0:  # the whole lines of the first 1 MiB, parsed from memory
                sample = pacsv.read_csv(pa.py_buffer(head[:cut + 1]), **options)
            else:  # one line longer than the sample: the reader's first block
                sample = pa.Table.from_batches([pacsv.open_csv(path, **options).read_next_batch()])
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return list(numeric)  # the full read will say what is wrong
    quirky = []
    for raw in numeric:
        try:
            pc.cast(sample.column(raw), pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            quirky.append(raw)
    return quirky


def _sample_options(numeric: list[str], skip_lines: int) -> dict:
    """pyarrow CSV options reading ``numeric`` as strings in 1 MiB blocks, skipping malformed rows."""
    import pyarrow as pa
    from pyarrow import csv as pacsv

    return {
        "read_options": pacsv.ReadOptions(skip_rows=skip_lines, block_size=1 << 20),
        "parse_options": pacsv.ParseOptions(invalid_row_handler=lambda row: "skip"),
        "convert_options": pacsv.ConvertOptions(include_columns=numeric,
                                                column_types={c: pa.string() for c in numeric},
                                                null_values=NULL_MARKERS, strings_can_be_null=True),
    }


def _invalid_to_nan(values, nulls: int):
    """Check a float64 column read with its ``nulls`` null (missing) cells as NaN -> (fixed copy or None when
    nothing is invalid, {kind: count}). Numbers no profiler writes -- NaN, +-inf, negative -- are counted by
    kind and read as missing (NaN) in the copy; the null cells are missing, not invalid, and not counted.
    """
    import numpy as np

    if nulls == len(values):
        return None, {}
    total, low = float("nan"), 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        if nulls:  # NaN beyond the nulls' own are cells that said nan
            nans = int(np.isnan(values).sum()) - nulls
            if not nans:  # then some cell holds a number: nanmin has one to return
                total, low = np.nansum(values), np.nanmin(values)
        else:
            nans = 0
            total, low = values.sum(), values.min()  # any NaN or inf makes the sum non-finite
    if not nans and np.isfinite(total) and low >= 0:
        return None, {}  # the usual case: two reductions, no mask, no copy
    if not nulls:
        nans = int(np.isnan(values).sum())
    is_inf = np.isinf(values)
    with np.errstate(invalid="ignore"):
        negative = (values < 0) & ~is_inf
    counts = {"nan": nans, "inf": int(is_inf.sum()), "negative": int(negative.sum())}
    fixed = np.where(is_inf | negative, np.nan, values)
    return fixed, {k: n for k, n in counts.items() if n}


def _to_float(col):
    """Strings -> (float64 column, {"text": n, "nan": n} cells read as missing). Strips spaces, TABs and
    quotes first (the start-time TAB quirk); N/A markers stay missing and are not counted."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cleaned = pc.utf8_trim(col, characters=' \t\r"')
    try:  # the usual case (the start-time TAB): every trimmed cell is a number; no N/A marker parses
        return pc.cast(cleaned, pa.float64()), {}
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    cleaned = pc.if_else(pc.is_in(cleaned, value_set=pa.array(NULL_MARKERS)), None, cleaned)
    try:
        return pc.cast(cleaned, pa.float64()), {}
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        import pandas as pd

        values = cleaned.to_pandas()
        numbers = pd.to_numeric(values, errors="coerce")
        unread = numbers.isna() & values.notna()
        nans = int((unread & values.str.lower().str.lstrip("+-").eq("nan")).sum())
        counts = {"nan": nans, "text": int(unread.sum()) - nans}
        # from_pandas: NaN -> null, so _invalid_to_nan does not count these cells twice
        column = pa.chunked_array([pa.array(numbers.to_numpy(dtype=float), from_pandas=True)])
        return column, {k: n for k, n in counts.items() if n}
