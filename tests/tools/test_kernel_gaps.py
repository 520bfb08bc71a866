"""tools/kernel_gaps.py on a small SQLite database built here with the columns of an nsys export's kernel
table (synthetic, not a profiler file): durations and back-to-back gaps per kernel, and bad files refused."""

import sqlite3
import subprocess
import sys

import pytest

import _benchmarks

gaps = _benchmarks.load("kernel_gaps")


def _trace(path, kernels):
    """``kernels``: (start_ns, end_ns, stream, name) rows written as nsys writes them (names in StringIds)."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "
                "streamId INTEGER, shortName INTEGER, demangledName INTEGER)")
    names = {n: i for i, n in enumerate(sorted({k[3] for k in kernels}))}
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, n) for n, i in names.items()])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, ?, ?, ?)",
                    [(s, e, st, names[n], names[n]) for s, e, st, n in kernels])
    con.commit()
    con.close()
    return str(path)


def test_durations_and_gaps_between_back_to_back_launches(tmp_path):
    us = 1000
    trace = _trace(tmp_path / "t.sqlite", [
        (0, 5 * us, 7, "hold"),
        (6 * us, 66 * us, 7, "ours"), (68 * us, 128 * us, 7, "ours"), (131 * us, 191 * us, 7, "ours"),
        (200 * us, 201 * us, 9, "ours"),  # another stream: its gap is not measured against stream 7
        (300 * us, 359 * us, 7, "peer"), (360 * us, 419 * us, 7, "peer"),
    ])
    table = gaps.gap_table(gaps.kernel_records(trace), min_us=2).set_index("kernel")
    assert "hold" in table.index and table.loc["hold", "gaps"] == 0
    assert table.loc["ours", "launches"] == 3  # the 1 us launch is under --min-us
    assert table.loc["ours", "median_us"] == pytest.approx(60)
    assert table.loc["ours", "gaps"] == 2 and table.loc["ours", "gap_us"] == pytest.approx(2.5)  # gaps 2 and 3
    assert table.loc["peer", "median_us"] == pytest.approx(59) and table.loc["peer", "gap_us"] == pytest.approx(1)


def test_the_cli_prints_the_table(tmp_path):
    trace = _trace(tmp_path / "t.sqlite", [(0, 10_000, 1, "k"), (12_000, 22_000, 1, "k")])
    proc = subprocess.run([sys.executable, str(_benchmarks.script("kernel_gaps")), trace],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "| k | 2 | 10.00 | 10.00 | 2.00 | 1 |" in proc.stdout


@pytest.mark.parametrize("content", [None, b"not a database", "empty"])
def test_a_file_that_is_not_a_kernel_trace_is_one_line_exit_2(tmp_path, content):
    path = tmp_path / "bad.sqlite"
    if content == "empty":
        sqlite3.connect(path).close()  # a database without the kernel table
    elif content is not None:
        path.write_bytes(content)
    proc = subprocess.run([sys.executable, str(_benchmarks.script("kernel_gaps")), str(path)],
                          capture_output=True, text=True, timeout=120)
    err = proc.stderr.strip()
    assert proc.returncode == 2
    assert err.startswith(f"error: {path}: not an Nsight Systems SQLite export") and "\n" not in err


def test_a_torch_profiler_chrome_trace_is_read_too(tmp_path):
    import json

    # the fields torch.profiler writes for a CUDA kernel event (synthetic values): ts and dur in us
    events = [{"ph": "X", "cat": "kernel", "name": n, "ts": ts, "dur": dur, "args": {"device": 0, "stream": 7}}
              for n, ts, dur in (("ours", 10.0, 60.5), ("ours", 72.0, 60.5), ("peer", 140.0, 59.0))]
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::empty", "ts": 0.0, "dur": 1.0})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    table = gaps.gap_table(gaps.kernel_records(str(path))).set_index("kernel")
    assert list(table.index) == ["ours", "peer"]
    assert table.loc["ours", "median_us"] == pytest.approx(60.5)
    assert table.loc["ours", "gap_us"] == pytest.approx(1.5) and table.loc["peer", "gaps"] == 0


@pytest.mark.parametrize("content", ["{not json", '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "dur": 1}]}',
                                     '{"traceEvents": [{"cat": "kernel", "name": "k", "ts": "soon", "dur": 1}]}',
                                     '{"traceEvents": 3}'])
def test_a_chrome_trace_without_kernels_is_one_line_exit_2(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    proc = subprocess.run([sys.executable, str(_benchmarks.script("kernel_gaps")), str(path)],
                          capture_output=True, text=True, timeout=120)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and err.startswith(f"error: {path}: ") and "\n" not in err


def test_batches_are_runs_of_exactly_n_launches(tmp_path):
    us = 1000
    rows = [(0, 100 * us, 1, "hold")]
    t = 100 * us
    for dur, gap in ((60, 1), (60, 1), (62, 1)):  # a timed batch of 3: durations 60, 60, 62; gaps 1, 1
        t += gap * us
        rows.append((t, t + dur * us, 1, "ours"))
        t += dur * us
    rows.append((t + 5 * us, t + 105 * us, 1, "hold"))
    rows += [(500 * us + i * 70 * us, 500 * us + i * 70 * us + 50 * us, 1, "ours") for i in range(4)]  # a run of 4
    table = gaps.batch_table(gaps.kernel_records(_trace(tmp_path / "t.sqlite", rows)), 3).set_index("kernel")
    assert list(table.index) == ["ours"]  # the hold runs are of length 1, the run of 4 is not a batch of 3
    assert table.loc["ours", "batches"] == 1
    assert table.loc["ours", "median_us"] == pytest.approx(60)
    assert table.loc["ours", "gap_us"] == pytest.approx(1)
    assert table.loc["ours", "span_us"] == pytest.approx((60 + 1 + 60 + 1 + 62) / 3)
    auto = gaps.batch_table(gaps.kernel_records(_trace(tmp_path / "a.sqlite", rows + rows_of_four_again(us))))
    auto = auto.set_index("kernel")  # runs of 4 are now the most frequent: auto picks them
    assert auto.loc["ours", "calls"] == 4 and auto.loc["ours", "batches"] == 2
    assert auto.loc["ours", "median_us"] == pytest.approx(50) and auto.loc["ours", "gap_us"] == pytest.approx(20)


def rows_of_four_again(us):
    """A second run of 4 launches (50 us each, 20 us apart) after a hold, later in the trace."""
    t = 2000 * us
    return [(t - 10 * us, t - 5 * us, 1, "hold")] + [(t + i * 70 * us, t + i * 70 * us + 50 * us, 1, "ours")
                                                     for i in range(4)]


@pytest.mark.parametrize("bad", ["1", "x", "-3"])
def test_batches_not_auto_nor_two_or_more_is_one_line_exit_2(tmp_path, bad):
    trace = _trace(tmp_path / "t.sqlite", [(0, 10_000, 1, "k")])
    proc = subprocess.run([sys.executable, str(_benchmarks.script("kernel_gaps")), trace, f"--batches={bad}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: --batches {bad}: a batch has at least 2 launches (or auto)"


def test_a_real_torch_profiler_trace():
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "cuda" / "trace.json"  # captured on the H200 (its README)
    events = json.loads(path.read_text())["traceEvents"]
    want = sorted(e["dur"] for e in events if e.get("cat") == "kernel" and e.get("name") == "_axpb_kernel")
    table = gaps.gap_table(gaps.kernel_records(str(path))).set_index("kernel")
    assert table.loc["_axpb_kernel", "launches"] == len(want) == 2
    assert table.loc["_axpb_kernel", "median_us"] == pytest.approx(sum(want) / 2)
