"""The one console, driven directly in a real pseudo-terminal: a progress line with a known total shows
done/total and an ETA; a nested progress is a second line of the same display; status lines, data on a
stdout that is the same terminal, Python's own stderr writes and a native library's writes to fd 2 (relayed
by ``collect.native_log``) all land above the display, never glued onto it; a finished progress leaves one
plain line, a failed one nothing."""

import re
import textwrap

from _pty import assert_clean, run_pty

SCRIPT = textwrap.dedent("""\
    import os, sys, time
    from ascendopt import console
    from ascendopt.collect.native_log import quiet_native_log

    with console.progress("outer", total=4) as outer:
        for i in range(4):
            time.sleep(0.25)
            console.status(f"status line {i}")
            with console.progress("inner timing", total=10) as inner:
                for _ in range(10):
                    time.sleep(0.08)
                    inner.advance()
            outer.advance()
            console.out(f"data line {i}")
            print(f"python stderr line {i}", file=sys.stderr)
            with quiet_native_log():
                os.write(2, f"native line {i}\\n".encode())
                os.write(2, b"INFO:2026-01-01 00:00:00 1:1 x.cpp:1] kineto noise\\n")
    try:
        with console.progress("failing", total=3) as bar:
            bar.advance()
            time.sleep(0.3)
            raise RuntimeError("boom")
    except RuntimeError:
        console.error("the failing step stopped")
""")


def test_progress_status_data_and_native_lines_share_one_display(tmp_path):
    script = tmp_path / "drive.py"
    script.write_text(SCRIPT)
    code, raw, lines = run_pty(str(script), python=[])
    text = raw.decode("utf-8", "replace")
    assert code == 0, "\n".join(lines)
    # a known total: done/total and an ETA, drawn while it runs
    assert re.search(r"\b[1-9]/10\b", text) and re.search(r"eta \d:\d\d:\d\d", text), text[:3000]
    starts = [f"{what} line {i}" for i in range(4) for what in ("status", "data", "python stderr", "native")]
    assert_clean(raw, lines, [*starts, "outer: 4/4 done in ", "inner timing: 10/10 done in ",
                              "error: the failing step stopped"])
    assert not any("kineto noise" in line for line in lines)  # the filter still drops kineto's lines
    assert sum(line.startswith("inner timing: 10/10 done") for line in lines) == 4
    assert not any(line.startswith("failing") for line in lines)  # a failed progress leaves nothing


# The display's refresh thread may draw at any instant, also the instant fd 2 is pointed at the filter's pipe or
# back; a frame written into the pipe comes back relayed as text, and the next frame is glued after it (a CI run's
# demo screen kept one so). The rule: whenever fd 2 moves, the display already writes elsewhere (a second
# descriptor of the terminal, switched to under its lock, so no redraw is between its terminal check and its
# write then). Every dup2 onto fd 2 records a breach of that rule, then forces a redraw.
REDRAW_AT_EVERY_SWITCH = textwrap.dedent("""\
    import os, sys, time
    from ascendopt import console
    from ascendopt.collect.native_log import quiet_native_log

    real_dup2, breaches, switches = os.dup2, [], []

    def dup2_then_redraw(fd, fd2, *args, **kwargs):
        live = console._LIVE["progress"]
        if fd2 == 2 and live is not None:
            switches.append(fd)
            if live.console.file.fileno() == 2:
                breaches.append(f"dup2({fd}, 2) while the display writes to fd 2")
        result = real_dup2(fd, fd2, *args, **kwargs)
        if fd2 == 2 and live is not None:
            live.refresh()
        return result

    os.dup2 = dup2_then_redraw
    with console.progress("switching", total=5) as bar:
        for i in range(5):
            with quiet_native_log():
                os.write(2, f"native line {i}\\n".encode())
            bar.advance()
            time.sleep(0.02)  # a phase long enough to leave its "done in" line (console.QUIET_PHASE_S)
    open(sys.argv[1], "w").write("\\n".join([str(len(switches)), *breaches]))
""")


def test_fd2_moves_only_while_the_display_writes_elsewhere(tmp_path):
    script, breaches = tmp_path / "switch.py", tmp_path / "breaches.txt"
    script.write_text(REDRAW_AT_EVERY_SWITCH)
    code, raw, lines = run_pty(str(script), str(breaches), python=[])
    assert code == 0, "\n".join(lines)
    count, *found = breaches.read_text().splitlines()
    assert int(count) == 10, "fd 2 did not move to the filter and back 5 times under the display"
    assert found == []
    assert_clean(raw, lines, [*(f"native line {i}" for i in range(5)), "switching: 5/5 done in "])


# A native writer's partial lines while a display is live: a ``\r`` progress of its own, a line written in two
# pieces, and a last piece without its newline when the display ends. Printed at once, each would have the
# display's next frame drawn right after it, on the same screen line.
PARTIAL_LINES = textwrap.dedent("""\
    import os, time
    from ascendopt import console
    from ascendopt.collect.native_log import quiet_native_log

    with console.progress("outer", total=3) as bar:
        with quiet_native_log():
            for step in range(1, 4):
                os.write(2, f"\\rcompiling {step}/3".encode())
                time.sleep(0.3)
                bar.advance()
            os.write(2, b"\\n")
            os.write(2, b"compiled: ")
            time.sleep(0.3)
            os.write(2, b"3 kernels\\n")
            os.write(2, b"left without a newline")
            time.sleep(0.3)
    console.status("after the display")
""")


def test_partial_native_lines_are_held_until_they_end(tmp_path):
    script = tmp_path / "partial.py"
    script.write_text(PARTIAL_LINES)
    code, raw, lines = run_pty(str(script), python=[])
    assert code == 0, "\n".join(lines)
    assert_clean(raw, lines, ["compiled: 3 kernels", "left without a newline", "outer: 3/3 done in ",
                              "after the display"])
    # a \r progress shows as a terminal shows it once its line ends: the last update, on a line of its own
    assert [line for line in lines if line.startswith("compiling")] == ["compiling 3/3"], "\n".join(lines)
