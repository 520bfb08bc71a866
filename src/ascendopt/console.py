"""The one place that writes to the terminal.

Status, progress, warnings and errors go to stderr; data (tables, JSON, paths asked for) goes to
stdout, so ``ascendopt analyze --json ... | jq`` works.

One console owns the screen. While a progress display (spinner, bar) is live, every line (status,
warnings, data for a stdout that is the same terminal, and what other writers put on stderr: Python's
``sys.stderr``, a native library's or a child's output relayed by ``relay``) is printed through the
console that draws the display, so it lands above the display, never glued onto it. Nested
``progress`` calls add a line to the display already live. A finished progress leaves one plain line
(``demo: 7/7 done in 12.3 s``), a failed one nothing (the error says it).

Colour: verdicts and stage statuses are coloured on a terminal (``styled``, ``verdict``); ``NO_COLOR``
(any non-empty value, no-color.org) or ``--no-color`` turn colour off; output that is not a terminal is
plain text (no escape codes). ``--quiet``: only verdict lines (``verdict``) and errors. ``--csv``: tables
(``table``) are written as CSV on stdout, other data lines go to stderr.

The event stream (``--events FILE``, ``-`` for stderr) is the same progress for programs: one JSON
object per line, ``{"event", "time", "command", ...}`` (``cli/schemas/events.schema.json``). It hangs off
the calls that already inform humans, so the two never diverge: ``progress`` bars give ``phase_start``,
``progress`` (done/total, message) and ``phase_end``; ``status`` lines give ``progress`` with the
message; ``event`` adds the data events (``measurement``, ``stage_result``, ``round_recorded``); the
CLI's error boundary ends the stream with ``error`` (on a failure) and the command's ``phase_end``.
Events are written under ``--quiet`` too.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import IO, Any

from rich.console import Console
from rich.text import Text

_stdout: Console | None = None
_stderr: Console | None = None

# the command line's output settings (``configure``); the CLI resets them at the start of every command
_SETTINGS: dict[str, bool] = {"quiet": False, "no_color": False, "csv": False}
# the live progress display, when one is drawn (``progress``); every line goes through its console
_LIVE: dict[str, Any] = {"progress": None}
# streams standing for the terminal while fd 2 itself is redirected to a filter (``stderr_on``)
_ERR_STREAMS: list[IO[str]] = []
# a relayed line not yet ended while a display is live (``relay``), and the lock that orders relays against the
# display's end (relays come from a filter's thread)
_RELAY_HELD: list[str] = [""]
_RELAY_LOCK = threading.Lock()

# Outcome words -> rich styles: green passes and keeps, red failures and drops, yellow what could not tell
# or is undone. Keys are lower case; ``styled`` looks the word up case-insensitively.
OUTCOME_STYLES = {
    "pass": "bold green", "keep": "bold green", "faster": "green", "ok": "green",
    "fail": "bold red", "drop": "bold red", "slower": "red", "red": "bold red",
    "inconclusive": "bold yellow", "implausible": "bold yellow", "revert": "yellow", "same": "", "skip": "dim",
    "skipped": "dim", "not-run": "dim", "-": "dim",
}


def configure(*, quiet: bool | None = None, no_color: bool | None = None, csv: bool | None = None) -> None:
    """Set the output settings (``None`` leaves one as it is); the consoles are rebuilt to follow them."""
    global _stdout, _stderr
    for key, value in (("quiet", quiet), ("no_color", no_color), ("csv", csv)):
        if value is not None:
            _SETTINGS[key] = bool(value)
    _stdout = _stderr = None


def reset() -> None:
    """Default settings (the CLI calls it before each command: tests run many commands in one process)."""
    configure(quiet=False, no_color=False, csv=False)


def detach() -> None:
    """In a pool's device process (``ascendopt.pool``): quiet, no live display and no event stream of its own (both
    are the command's, in the parent: its progress shows the pool). The parent's event file is left open there."""
    configure(quiet=True)
    _LIVE["progress"] = None
    _EVENTS.update(file=None, owned=False, phases=[])


def is_quiet() -> bool:
    return _SETTINGS["quiet"]


def csv_tables() -> bool:
    return _SETTINGS["csv"]


def colour_off() -> bool:
    """``--no-color``, or ``NO_COLOR`` set to any non-empty value (no-color.org)."""
    return _SETTINGS["no_color"] or os.environ.get("NO_COLOR", "") != ""


def unicode_ok(console: Console | None = None) -> bool:
    """Block characters may be printed: colour is on (``NO_COLOR`` users often sit at plain terminals) and
    the stream's encoding is UTF-8."""
    encoding = (console or stdout()).encoding or ""
    return not colour_off() and encoding.lower().replace("-", "").startswith("utf")


def _unproxied(stream: Any) -> Any:
    """The stream behind rich's ``FileProxy`` (what ``sys.stderr`` is while a live display redirects it)."""
    return getattr(stream, "rich_proxied_file", stream)


def _isatty(stream: Any) -> bool:
    try:
        return bool(_unproxied(stream).isatty())
    except (AttributeError, ValueError, OSError):
        return False


class _Console(Console):
    """rich's Console, whose ``print`` holds the live display's lock through the whole render and write. rich takes
    that lock only while it places the cursor above the display, so its refresh thread could redraw in between;
    the line printed then landed where the display's rows had been and was erased with them (a line lost from
    the terminal, seen about once in a dozen runs on a loaded machine)."""

    def print(self, *args: Any, **kwargs: Any) -> None:
        live = self._live_stack[0] if self._live_stack else None
        if live is None:
            return super().print(*args, **kwargs)
        with live._lock:  # an RLock: the refresh thread's own print, made under it, takes it again
            return super().print(*args, **kwargs)


def _make(stderr: bool, file: Any) -> Console:
    return _Console(file=file, stderr=stderr, markup=False, emoji=False, highlight=False, soft_wrap=stderr,
                   no_color=colour_off())


def stdout() -> Console:
    global _stdout
    target = _unproxied(sys.stdout)
    if _stdout is None or _stdout.file is not target:
        _stdout = _make(False, target)
    return _stdout


def stderr() -> Console:
    """The console for stderr: the live display's while one is drawn (so nothing is glued onto it)."""
    global _stderr
    live = _LIVE["progress"]
    if live is not None:
        return live.console
    target = _ERR_STREAMS[-1] if _ERR_STREAMS else _unproxied(sys.stderr)
    if _stderr is None or _stderr.file is not target:
        _stderr = _make(True, target)
    return _stderr


def _data() -> Console:
    """Where a data line goes: stdout; through the live display's console when stdout is the same terminal
    it is drawn on (a line written beside it would be glued onto the bar); stderr under ``--csv``."""
    live = _LIVE["progress"]
    if live is not None and (_isatty(sys.stdout) or _SETTINGS["csv"]):
        return live.console
    return stderr() if _SETTINGS["csv"] else stdout()


@contextmanager
def stderr_on(stream: IO[str]) -> Iterator[None]:
    """The console writes to ``stream`` (a second descriptor of the terminal fd 2 is on) inside the block, so
    fd 2 itself may be pointed at a filter there (``collect.native_log``) without the console's own lines
    looping through it. Point fd 2 away only inside the block, and back before it ends: the live display
    redraws from a thread at any instant, and a frame written to fd 2 while it is the filter's pipe would come
    back relayed as text, with the next frame glued after it. The switch is made under the display's lock,
    which a redraw holds from the terminal check to the write."""
    live = _LIVE["progress"]
    with live._lock if live is not None else nullcontext():
        before = live.console.file if live is not None else None
        _ERR_STREAMS.append(stream)
        if live is not None:
            live.console.file = stream
    try:
        yield
    finally:
        with live._lock if live is not None else nullcontext():
            _ERR_STREAMS.remove(stream)
            if live is not None and _LIVE["progress"] is live:
                live.console.file = before


def _as_shown(line: str) -> str:
    """What a terminal shows of ``line`` (no newline in it) once it ends: its last ``\\r`` update."""
    line = line.removesuffix("\r")  # a CRLF ending
    return line[line.rfind("\r") + 1:]


def relay(text: str) -> None:
    """Text another writer put on stderr (a native library, a child process), caught on a pipe: printed
    through the console, above any live display, as is (no styling, no wrapping). Shown under ``--quiet``
    too: it may be an error, and the same writer's output outside a filter is not held back either.

    While a display is live, a line is printed once it ends, as a terminal would show it then (its last ``\\r``
    update): the display's next frame is drawn right after whatever was printed, so a piece without its newline
    would have the frame glued onto it. What is still held when the display ends is printed as a line then."""
    if not text:
        return
    with _RELAY_LOCK:
        if _LIVE["progress"] is not None:
            *ended, _RELAY_HELD[0] = (_RELAY_HELD[0] + text).split("\n")
            if ended:
                stderr().print(Text("".join(_as_shown(line) + "\n" for line in ended)), end="", soft_wrap=True)
            return
    target = stderr().file  # no display: the bytes as they came, \r progress updates included
    try:
        target.write(text)
        target.flush()
    except (OSError, ValueError):  # a closed terminal: nothing left to show it on
        pass


def styled(text: str, outcome: str | None = None) -> Text:
    """``text`` in the colour of ``outcome`` (``OUTCOME_STYLES``; default: ``text`` itself), for a table
    cell or a line; plain when colour is off or the output is not a terminal (rich drops the style)."""
    style = OUTCOME_STYLES.get((outcome if outcome is not None else text).strip().lower(), "")
    return Text(text, style=style)


def status(message: str) -> None:
    """A progress/status line for humans (stderr); a ``progress`` event with the message."""
    if not _SETTINGS["quiet"]:
        stderr().print(message, style="dim")
    event("progress", phase=_EVENTS["phases"][-1] if _EVENTS["phases"] else None, message=message)


def info(message: str | Text) -> None:
    if not _SETTINGS["quiet"]:
        stderr().print(message)


def warn(message: str) -> None:
    if not _SETTINGS["quiet"]:
        stderr().print(f"warning: {message}", style="yellow")


def error(message: str) -> None:
    stderr().print(f"error: {message}", style="bold red")


def out(text: str | Text = "") -> None:
    """Data for stdout, printed as is: never wrapped at the terminal width (a path or a markdown line
    must survive a pipe or a redirect whole). Nothing under ``--quiet``; stderr under ``--csv``."""
    if not _SETTINGS["quiet"]:
        _data().print(text, soft_wrap=True)


def verdict(text: str, outcome: str) -> None:
    """The command's verdict line (``gate: PASS``, ``verdict: keep``) on stdout in the colour of ``outcome``;
    printed under ``--quiet`` too (it is what ``--quiet`` keeps)."""
    _data().print(styled(text, outcome), soft_wrap=True)


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 launch``, ``2 launches``: a count with its noun in the right number (``plural_form``: for nouns whose
    plural is not the noun + ``s``/``es``)."""
    if count == 1:
        return f"{count} {noun}"
    if plural_form is None:
        plural_form = noun + ("es" if noun.endswith(("s", "x", "z", "ch", "sh")) else "s")
    return f"{count} {plural_form}"


# (upper bound in microseconds, divisor, unit): a duration prints in the largest unit it reaches. ASCII "us" for
# microseconds, as every other duration this tool prints (a terminal without UTF-8 shows it the same).
_DURATION_UNITS = ((1e3, 1.0, "us"), (1e6, 1e3, "ms"), (math.inf, 1e6, "s"))


def duration_unit(us: float, digits: int = 2) -> tuple[float, str]:
    """``(divisor, unit)`` for a duration of ``us`` microseconds: us below 1 ms, ms below 1 s, else s (judged on
    the value as printed with ``digits`` decimals, so 999.996 us is ``1.00 ms``, never ``1000.00 us``). A line that
    prints several related durations (a median and its p20/p80) picks the unit once, from the median."""
    magnitude = abs(us) if math.isfinite(us) else 0.0
    for bound, divisor, unit in _DURATION_UNITS:
        if round(magnitude / divisor, digits) * divisor < bound:
            return divisor, unit
    return _DURATION_UNITS[-1][1:]  # pragma: no cover - the last bound is infinite


def duration_text(us: float | None, *, unit_of: float | None = None, digits: int = 2, sign: bool = False) -> str:
    """A duration given in microseconds as text in the unit its magnitude picks (``duration_unit``):
    ``812.40 us``, ``120.72 ms``, ``3.07 s``; ``unit_of``: pick the unit from this value instead (the median a
    spread belongs to); ``sign``: a leading ``+`` on a positive value (a change). None: ``-``. Text only: JSON keeps
    raw numbers in their fixed units (``_us``, ``_ms`` fields)."""
    if us is None:
        return "-"
    divisor, unit = duration_unit(us if unit_of is None else unit_of, digits)
    return f"{us / divisor:{'+' if sign else ''}.{digits}f} {unit}"


def spread_text(median_us: float, p20_us: float, p80_us: float) -> str:
    """``120.72 ms [p20 118.20, p80 121.05]``: a median and its p20/p80 in one unit, the median's."""
    return (f"{duration_text(median_us)} [p20 {duration_text(p20_us, unit_of=median_us).split()[0]}, "
            f"p80 {duration_text(p80_us, unit_of=median_us).split()[0]}]")


def finite_or_none(value: Any) -> Any:
    """One scalar made JSON/YAML-ready: NaN and +-inf -> None (a metric that was not collected is null,
    never 0), numpy scalars -> the Python number; anything else is returned as is.

    The one NaN -> None rule: ``print_json``, ``analyze.diagnosis`` reports and ``analyze.rules`` use it.
    """
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return finite_or_none(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def dumps_json(obj: Any) -> str:
    return json.dumps(_jsonable(obj), indent=2, allow_nan=False)


class JsonCapture:
    """What a command hands over for its ``--json`` envelope: its payload (``data``) and the commands that
    make sense next (``next``). The CLI's error boundary prints the envelope once the command has ended,
    whatever its outcome (``cli.envelope``)."""

    def __init__(self) -> None:
        self.data: Any = None
        self.next: list[str] = []


_capture: JsonCapture | None = None


@contextmanager
def capture_json() -> Iterator[JsonCapture]:
    """While active, ``print_json`` and ``next_steps`` record into the yielded ``JsonCapture`` instead of
    printing (the ``--json`` envelope is written by the caller, after the command)."""
    global _capture
    previous, _capture = _capture, JsonCapture()
    try:
        yield _capture
    finally:
        _capture = previous


def print_json(obj: Any) -> None:
    """Machine-readable output: valid JSON, NaN written as null. Under ``capture_json`` (``--json`` on
    the command line) the object becomes the envelope's ``data``; otherwise it is printed on stdout."""
    if _capture is not None:
        _capture.data = _jsonable(obj)
        return
    sys.stdout.write(dumps_json(obj) + "\n")
    sys.stdout.flush()


_deferred_next: list[tuple[str, str]] | None = None


@contextmanager
def deferred_next_steps() -> Iterator[list[tuple[str, str]]]:
    """While active, ``next_steps`` (text mode) records into the yielded list; the caller prints it with
    ``print_next_steps`` once the command has ended, so the ``next:`` line is the last thing on stderr."""
    global _deferred_next
    previous, _deferred_next = _deferred_next, []
    try:
        yield _deferred_next
    finally:
        _deferred_next = previous


def next_steps(steps: Sequence[tuple[str, str]]) -> None:
    """The commands that make sense after this one, as ``(command line, why)`` pairs: the envelope's
    ``next`` under ``capture_json``; else one ``next:`` line on stderr (guidance, not data), after the command
    when ``deferred_next_steps`` is active."""
    if _capture is not None:
        _capture.next = [command for command, _ in steps]
    elif _deferred_next is not None:
        _deferred_next[:] = list(steps)
    else:
        print_next_steps(steps)


def print_next_steps(steps: Sequence[tuple[str, str]]) -> None:
    """One ``next:`` line on stderr: each command in backquotes with why, in order (nothing for no steps)."""
    if steps:
        info("next: " + "; then ".join(f"`{command}`" + (f" ({why})" if why else "") for command, why in steps))


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    justify: Sequence[str] | None = None,
) -> None:
    """Print a table of data on stdout. Numbers should be formatted by the caller; a cell may be a rich
    ``Text`` (``styled``). ``--csv``: the header and rows as CSV (plain text; the title is left out), a
    blank line after, so several tables stay apart; ``--quiet``: nothing."""
    if _SETTINGS["quiet"]:
        return
    cells = [["" if v is None else v if isinstance(v, Text) else str(v) for v in row] for row in rows]
    if _SETTINGS["csv"]:
        import csv
        import io

        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(list(columns))
        writer.writerows([[c.plain if isinstance(c, Text) else c for c in row] for row in cells])
        sys.stdout.write(buffer.getvalue() + "\n")
        sys.stdout.flush()
        return
    from rich.table import Table

    t = Table(title=title, title_justify="left", show_lines=False, pad_edge=False)
    for i, col in enumerate(columns):
        t.add_column(col, justify=(justify[i] if justify else "left"), overflow="fold")
    for row in cells:
        t.add_row(*row)
    _data().print(t)


def _progress_columns() -> list[Any]:
    """Spinner, what is being done, and, once the amount of work is known, a bar, ``done/total`` and the
    estimated time left; the time elapsed last."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    class WhenTotal(ProgressColumn):
        """``inner`` while the task has a known, non-zero total; nothing before."""

        def __init__(self, inner: ProgressColumn) -> None:
            super().__init__()
            self.inner = inner

        def render(self, task: Any) -> Any:
            return self.inner.render(task) if task.total else Text("")

    class Eta(ProgressColumn):
        """``eta 0:00:12`` from rich's speed estimate (``eta -`` until there is one)."""

        max_refresh = 0.5

        def render(self, task: Any) -> Text:
            left = task.time_remaining
            if left is None:
                return Text("eta -", style="progress.remaining")
            minutes, seconds = divmod(int(math.ceil(left)), 60)
            hours, minutes = divmod(minutes, 60)
            return Text(f"eta {hours}:{minutes:02d}:{seconds:02d}", style="progress.remaining")

    return [SpinnerColumn(), TextColumn("{task.description}"), WhenTotal(BarColumn(bar_width=20)),
            WhenTotal(MofNCompleteColumn()), WhenTotal(Eta()), TimeElapsedColumn()]


def _seconds_text(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


# A phase shorter than this (s) leaves no "done in" line: it would read "done in 0.0 s" (cached, nothing to do)
QUIET_PHASE_S = 0.05


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator[Any]:
    """A progress line on stderr; yields an object with ``advance(n=1)``, ``update(text)`` and
    ``set_total(n)``. With a known total (``total`` or ``set_total``) the line shows a bar, ``done/total``
    and an ETA. Drawn live on a terminal only (never under ``--quiet``); inside another ``progress`` it is
    a second line of the same display. On success it leaves one plain line, ``description: done/total
    done in 1.2 s`` (none under ``QUIET_PHASE_S``); on an error nothing. Events: ``phase_start`` (phase =
    ``description``), ``progress``
    on each call (with a total: ``eta_s``, the seconds left at the pace so far), ``phase_end`` with the
    status and ``elapsed_s``."""
    import time

    started = time.monotonic()
    event("phase_start", phase=description, total=total)
    _EVENTS["phases"].append(description)
    outcome = "error"
    bar, owner, task = _LIVE["progress"], False, None
    done, size = [0], [total]
    try:
        if bar is None and not _SETTINGS["quiet"] and stderr().is_terminal:
            from rich.progress import Progress

            bar = Progress(*_progress_columns(), console=stderr(), transient=True,
                           redirect_stdout=_isatty(sys.stdout), redirect_stderr=True)
            bar.start()
            owner, _LIVE["progress"] = True, bar
        if bar is not None:
            task = bar.add_task(description, total=total)

        class _Handle:
            def advance(self, n: int = 1) -> None:
                done[0] += n
                if task is not None:
                    bar.advance(task, n)
                # the time left at the pace so far (s); None while the total is unknown
                eta = (round((time.monotonic() - started) / done[0] * max(0, size[0] - done[0]), 1)
                       if size[0] and done[0] else None)
                event("progress", phase=description, done=done[0], total=size[0], eta_s=eta)

            def update(self, text: str) -> None:
                if task is not None:
                    bar.update(task, description=text)
                event("progress", phase=description, done=done[0], total=size[0], message=text)

            def set_total(self, n: int) -> None:
                """Make the line determinate once the amount of work is known (``done/total``, ETA)."""
                size[0] = n
                if task is not None:
                    bar.update(task, total=n)

        yield _Handle()
        outcome = "ok"
    finally:
        if task is not None:
            bar.remove_task(task)
        if owner:
            with _RELAY_LOCK:  # no relay between the display's end and the held line's print
                _LIVE["progress"] = None
                bar.stop()
                held, _RELAY_HELD[0] = _RELAY_HELD[0], ""
                if held:
                    stderr().print(Text(_as_shown(held)), soft_wrap=True)
        if _EVENTS["phases"] and _EVENTS["phases"][-1] == description:
            _EVENTS["phases"].pop()
        elapsed = time.monotonic() - started
        event("phase_end", phase=description, status=outcome, elapsed_s=round(elapsed, 3))
    if not _SETTINGS["quiet"] and elapsed >= QUIET_PHASE_S:  # work that took no time needs no line of its own
        count = f"{done[0]}/{size[0]} " if size[0] else ""
        stderr().print(f"{description}: {count}done in {_seconds_text(elapsed)}", style="dim")


# -- the event stream ------------------------------------------------------------------------------

EVENTS = ("phase_start", "progress", "measurement", "stage_result", "round_recorded", "pool", "phase_end", "error")
_EVENTS: dict[str, Any] = {"file": None, "owned": False, "command": None, "phases": [], "started": 0.0,
                           "errored": False}


def open_events(target: str, command: str) -> None:
    """Start the event stream of ``command`` to ``target`` (a file, appended to; ``-``: stderr) with the
    command's ``phase_start``. A file that cannot be opened is a usage error (exit 2) naming it."""
    import time

    from ascendopt.errors import UsageError

    close_events()
    if target == "-":
        handle, owned = sys.stderr, False
    else:
        try:
            handle, owned = open(target, "a", encoding="utf-8"), True  # noqa: SIM115 - kept open for the command
        except OSError as exc:
            reason = "is a directory" if isinstance(exc, IsADirectoryError) else (exc.strerror or "").lower()
            raise UsageError(f"{target}: cannot write ({reason}; --events needs a file path or -)") from None
    _EVENTS.update(file=handle, owned=owned, command=command, phases=[command], started=time.monotonic(),
                   errored=False)
    event("phase_start", phase=command)


def event(name: str, /, **fields: Any) -> None:
    """Write one event line (no stream open: nothing). ``name`` is one of ``EVENTS``; ``fields`` are
    made JSON-ready (NaN -> null) like ``print_json``."""
    import datetime as _dt

    handle = _EVENTS["file"]
    if handle is None:
        return
    if name not in EVENTS:
        raise ValueError(f"unknown event {name!r}")
    if name == "error":
        _EVENTS["errored"] = True
    line = {"event": name, "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
            "command": _EVENTS["command"], **fields}
    try:
        handle.write(json.dumps(_jsonable(line), allow_nan=False, separators=(",", ":")) + "\n")
        handle.flush()
    except (OSError, ValueError):  # a closed pipe or file: the stream ends, the command goes on
        _EVENTS["file"] = None


def end_events(exit_code: int, message: str | None = None, hint: str | None = None) -> None:
    """End the stream: an ``error`` event when the command failed (unless one was written), then the
    command's ``phase_end`` with its exit code; the file is closed."""
    import time

    from ascendopt.errors import ExitCode

    if _EVENTS["file"] is None:
        return
    if exit_code != 0 and not _EVENTS["errored"]:
        names = {int(c): c.name.lower() for c in ExitCode}
        kind = {70: "internal", 130: "interrupted"}.get(exit_code, names.get(exit_code, "error"))
        event("error", kind=kind, exit_code=exit_code, message=message or f"exit {exit_code}", hint=hint)
    event("phase_end", phase=_EVENTS["command"], status="ok" if exit_code == 0 else "error", exit_code=exit_code,
          elapsed_s=round(time.monotonic() - _EVENTS["started"], 3))
    close_events()


def close_events() -> None:
    handle = _EVENTS["file"]
    if handle is not None and _EVENTS["owned"]:
        handle.close()
    _EVENTS.update(file=None, owned=False, command=None, phases=[], errored=False)
