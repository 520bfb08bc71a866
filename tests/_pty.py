"""Running a command in a real pseudo-terminal and rendering what it drew (pexpect + pyte), for the tests of
what people see in a terminal (tests/cli/test_terminal.py, tests/cli/test_console.py)."""

import os
import re
import sys

import pexpect
import pyte

COLS, ROWS = 120, 40
SPINNER = re.compile("[\u2800-\u28ff]")  # rich's default spinner (dots) is braille
CLOCK = re.compile(r"\b\d+:\d\d:\d\d\b")  # the elapsed and ETA columns of a live progress line
BOX_START = tuple("┏┡└│┃┌├")  # a table's own lines
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def pty_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRITON_INTERPRET", "ASCENDOPT_BACKEND", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", **extra)
    return env


def run_pty(*args: str, cols: int = COLS, env: dict[str, str] | None = None, timeout: float = 600,
            cwd: str | None = None, python: list[str] | None = None) -> tuple[int, bytes, list[str]]:
    """``ascendopt ARGS`` (or ``python ARGS`` with ``python=[]``) in a pty of ``cols`` x 40: (exit status, raw
    bytes, rendered screen lines)."""
    argv = (["-m", "ascendopt"] if python is None else python) + list(args)
    child = pexpect.spawn(sys.executable, argv, dimensions=(ROWS, cols), env=env or pty_env(), timeout=timeout, cwd=cwd)
    raw = b""
    while True:
        try:
            raw += child.read_nonblocking(65536, timeout=timeout)
        except pexpect.EOF:
            break
    child.close()
    return child.exitstatus, raw, render(raw, cols)


def render(raw: bytes, cols: int = COLS) -> list[str]:
    screen = pyte.Screen(cols, 4000)
    pyte.ByteStream(screen).feed(raw)
    lines = [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def assert_clean(raw: bytes, lines: list[str], starts: list[str]) -> None:
    """The live display was drawn (spinner frames and cursor moves in the raw bytes: a real terminal), and
    the final screen holds no leftover of it, and each of ``starts`` begins a line of its own."""
    text = "\n".join(lines)
    assert SPINNER.search(raw.decode("utf-8", "replace")), "no spinner drawn: not a live terminal"
    for line in lines:
        assert not SPINNER.search(line), f"spinner frame left on screen: {line!r}\n{text}"
        assert not CLOCK.search(line), f"progress columns left on screen (or glued): {line!r}\n{text}"
        assert "━" not in line or line.startswith(BOX_START), f"progress bar left on screen: {line!r}\n{text}"
    for start in starts:
        assert any(line.startswith(start) for line in lines), f"no line starts with {start!r}:\n{text}"
        assert not any(start in line and not line.startswith(start) for line in lines), \
            f"{start!r} glued after other text:\n{text}"


def colours(raw: bytes) -> set[str]:
    """The SGR colour parameters (foreground/background, 16, 256 or true colour) in ``raw``."""
    found = set()
    for params in SGR.findall(raw.decode("utf-8", "replace")):
        for p in params.split(";"):
            if p and (30 <= int(p) <= 49 or 90 <= int(p) <= 107):
                found.add(p)
    return found
