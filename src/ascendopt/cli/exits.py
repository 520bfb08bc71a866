"""Exit codes that hold under pipes and signals.

- SIGINT (Ctrl-C) and SIGTERM become ``Interrupted`` in the main thread: a ``BaseException`` that no
  ``except Exception`` swallows, so every ``finally`` and every ``except BaseException`` cleanup runs on
  the way out (child process groups are killed by ``process.run``, the workspace lock is released, and
  files are only ever replaced whole by ``workspace.atomic_write_text``); the boundary then exits
  128 + the signal number (130, 143) with one line.
- A reader that closes the pipe early (``ascendopt analyze ... | head``) is not an error of the command:
  stdout is switched to /dev/null at the first ``BrokenPipeError`` and the command finishes with the exit
  code of what it judged, quietly.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


class Interrupted(BaseException):
    """The process received SIGINT or SIGTERM while a command ran."""

    def __init__(self, signum: int):
        super().__init__(SIGNAL_NAMES.get(signum, f"signal {signum}"))
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise_interrupted(signum: int, _frame: Any) -> None:
    # One interrupt is enough: a second Ctrl-C must not cut the cleanup short (killing the child process
    # groups, releasing the lock) nor turn the one line into a traceback.
    for sig in SIGNAL_NAMES:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def signals_raise_interrupted() -> Iterator[None]:
    """SIGINT and SIGTERM raise ``Interrupted`` while the block runs (main thread only; a command run
    from a worker thread keeps the process's handlers)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_interrupted) for sig in SIGNAL_NAMES}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class PipeSafeStdout:
    """A stdout that stops writing, quietly, once its reader has gone (``BrokenPipeError``).

    The first broken write points file descriptor 1 at /dev/null too, so the interpreter's final flush
    at exit has nowhere to fail either.
    """

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.broken = False

    def _broke(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (AttributeError, OSError, ValueError):  # no descriptor (a test's buffer): dropping writes is enough
            pass

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._broke()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._broke()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ... as the real stream has them
        return getattr(self._stream, name)


@contextmanager
def pipe_safe_stdout() -> Iterator[PipeSafeStdout]:
    """``sys.stdout`` wrapped in ``PipeSafeStdout`` while the block runs."""
    real = sys.stdout
    safe = PipeSafeStdout(real)
    sys.stdout = safe
    try:
        yield safe
    finally:
        if sys.stdout is safe:
            sys.stdout = real
