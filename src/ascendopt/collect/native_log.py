"""Keep the profiler's native log lines off the user's terminal.

kineto (inside torch.profiler) writes lines such as
``USDT:2026-12-02 06:02:40 2541:2541 SyncActivityProfilerHandler.cpp:52] profiler_start`` and
``STAGE:... Completed Stage: Warm Up`` straight to file descriptor 2 from C++, at every schedule cycle;
``USDT`` lines ignore ``KINETO_LOG_LEVEL``. They break ``collect``'s progress line. ``quiet_native_log``
points fd 2 at a pipe for the duration, drops those lines and passes everything else on at once
(partial lines included, so a progress bar's ``\\r`` updates still show; ``console.relay`` holds a partial line
while a live display is drawn, which would be glued onto it).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator

from ascendopt import console

# "<TAG>:<date> <time> <pid>:<tid> <File>.cpp:<line>] <message>" with kineto's tags
# (searched, not anchored: a progress update without a newline may sit right before it)
KINETO_LINE = re.compile(rb"(?:USDT|STAGE|INFO|WARNING|ERROR):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ [\w.]+:\d+\] ")
_PREFIXES = (b"USDT:", b"STAGE:", b"INFO:", b"WARNING:", b"ERROR:")


def _maybe_native(partial: bytes) -> bool:
    """Could ``partial`` (a line not yet ended) still turn into a kineto line?"""
    tail = partial[partial.rfind(b"\r") + 1:]
    return any(p.startswith(tail[: len(p)]) for p in _PREFIXES) and (
        len(tail) < 40 or KINETO_LINE.match(tail) is not None)


@contextlib.contextmanager
def quiet_native_log() -> Iterator[list[str]]:
    """Drop kineto's native lines from fd 2 inside the block; yields the list the dropped lines go to."""
    dropped: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (an embedding host): nothing to filter
        yield dropped
        return
    read_end, write_end = os.pipe()

    def pump() -> None:
        pending = b""
        while True:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            out = b""
            for line in lines:
                found = KINETO_LINE.search(line)
                if found:  # keep what came before it on the same line (a progress update), drop the record
                    dropped.append(line[found.start():].decode("utf-8", "replace"))
                    out += line[: found.start()]
                else:
                    out += line + b"\n"
            if pending and not _maybe_native(pending):
                out, pending = out + pending, b""
            if out:
                console.relay(out.decode("utf-8", "replace"))
        if pending:
            console.relay(pending.decode("utf-8", "replace"))

    # the terminal fd 2 was, for the console: its own lines and the lines kept here are printed through it
    # (above any live progress display, never glued onto it), not looped through the pipe; fd 2 moves only
    # while the console writes there (stderr_on)
    terminal = os.fdopen(os.dup(saved), "w", encoding="utf-8", errors="replace", closefd=True)
    thread = threading.Thread(target=pump, name="ascendopt-native-log", daemon=True)
    try:
        with console.stderr_on(terminal):
            os.dup2(write_end, 2)
            os.close(write_end)
            thread.start()
            try:
                yield dropped
            finally:
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.flush()
                os.dup2(saved, 2)  # closes the pipe's last write end: the pump sees EOF and drains
                thread.join(timeout=5)
    finally:
        with contextlib.suppress(OSError, ValueError):
            terminal.flush()
        terminal.close()
        os.close(read_end)
        os.close(saved)


@contextlib.contextmanager
def quiet_profiler() -> Iterator[list[str]]:
    """Around a torch.profiler run: nothing the profiler prints on its own reaches the terminal.

    kineto's log level is raised for the process (``collect.kineto.silence_kineto_log``), its native lines
    are dropped from fd 2 (``quiet_native_log``; yields the dropped lines), and torch's "Profiler clears
    events at the end of each cycle" UserWarning is filtered (one trace per cycle is what we ask for).
    """
    import warnings

    from ascendopt.collect.kineto import silence_kineto_log

    silence_kineto_log()
    with quiet_native_log() as dropped, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle",
                                category=UserWarning)
        yield dropped
