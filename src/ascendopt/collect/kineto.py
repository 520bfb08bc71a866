"""Keep libkineto's own log lines off the user's terminal.

torch's profiler (libkineto, C++) writes lines such as ``USDT:2026-12-02 05:42:26 6459:6459
SyncActivityProfilerHandler.cpp:52] profiler_start`` straight to file descriptor 2 when a profile
starts and stops, whatever ``KINETO_LOG_LEVEL`` says; on a terminal they break the progress line.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

# libkineto's log prefix: LEVEL:date time pid:tid File.cpp:line]
_KINETO_LINE = re.compile(r"^[A-Z]+:\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \d+:\d+ \S+\.cpp:\d+\] ")


@contextmanager
def kineto_lines_dropped() -> Iterator[None]:
    """While the block runs, file descriptor 2 goes to a temporary file; afterwards every line of it
    that is not one of libkineto's is written to stderr again, in order. Wrap only the profiler's
    start and stop (short, and where kineto logs), so no progress output is held back meanwhile."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (a detached process): nothing to keep clean
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode("utf-8", errors="replace")
            kept = "".join(line for line in text.splitlines(keepends=True) if not _KINETO_LINE.match(line))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()
