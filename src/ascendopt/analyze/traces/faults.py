"""Any error a profile reader raises on a user's file is the file's fault, never an internal error.

Profiler files arrive damaged in more ways than any reader lists: NUL bytes, unterminated quotes, binary
garbage, a lone CR for a line end, another encoding, a truncated JSON trace, a field that is a number in one
row and an object in the next. Whatever the parser (``csv``, ``json``, pyarrow, pandas, the readers' own
code) raises on such a file becomes one ``ProfileError`` (exit 2) naming the file and, where the parser
says it, the line: ``reading(path)`` around the reading of one file, ``@reader`` on a function whose first
argument is the file. The tool's own one-line errors (every ``AscendoptError``) pass through unchanged, and so
do interrupts and running out of memory (the machine's state, not the file's).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from ascendopt.errors import AscendoptError, ProfileError

MESSAGE_CHARS = 160  # the parser's message, first line, trimmed: enough to say what is wrong
# "line 12" (csv, pandas), "Row #12" (pyarrow; rows of the file, the header is row 1), "row 12"
_LINE = re.compile(r"(?:\bline\s+|\bRow\s+#|\brow\s+)(\d+)")

F = TypeVar("F", bound=Callable)


def line_of(exc: BaseException, path: Path | None = None) -> int | None:
    """The 1-based line of ``path`` that ``exc`` is about, when the parser says it; else None."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.lineno
    if isinstance(exc, UnicodeDecodeError) and path is not None and isinstance(exc.object, bytes):
        try:  # the offset is into the decoded bytes: a line only when those were the whole file
            if path.is_file() and path.stat().st_size == len(exc.object):
                return exc.object.count(b"\n", 0, exc.start) + 1
        except OSError:
            return None
        return None
    match = _LINE.search(str(exc))
    return int(match.group(1)) if match else None


def fault(path: Path, exc: BaseException) -> ProfileError:
    """The one-line error for ``exc`` raised while reading ``path``."""
    line = line_of(exc, path)
    where = f"{path}: line {line}" if line else str(path)
    message = " ".join((str(exc).splitlines() or [""])[0].split())
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS] + "..."
    what = type(exc).__name__ + (f": {message}" if message else "")
    return ProfileError(f"{where}: cannot read this file ({what})",
                        hint="the file is damaged or not what its name says; export it again from the profiler")


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn any error raised inside into ``fault(path, exc)``; see the module docstring."""
    try:
        yield
    except (AscendoptError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - every parser error on the user's file is the file's fault
        raise fault(Path(path), exc) from exc


def reader(fn: F) -> F:
    """``reading(path)`` around a reader whose first argument is the file (or folder) it reads."""

    @functools.wraps(fn)
    def wrapped(path, *args, **kwargs):
        with reading(path):
            return fn(path, *args, **kwargs)

    return wrapped  # type: ignore[return-value]
