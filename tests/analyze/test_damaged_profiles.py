"""A damaged profile is the file's fault: exit 2, one line naming the file (and the line where the parser
says it), never exit 70 and a traceback, whatever the parser raised (analyze/traces/faults.py).

Run through the real CLI in a child process. Every damaged file starts from the bytes of a real fixture
(tests/data/ascend, tests/data/cuda) with one kind of damage done here (synthetic damage, not a capture).
"""

import json
import subprocess
import sys

import pytest

from profile_variants import CUDA, LEVEL1

TRACE = CUDA / "trace.json"
NCU = CUDA / "ncu_raw_pipe.csv"
NEWLINE = b"\n"


def _analyze(target):
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "analyze", str(target)], capture_output=True,
                          text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _kernel_details(tmp_path, data: bytes):
    path = tmp_path / "run" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path


def _long_level1() -> bytes:
    """The level1 fixture's rows six times over (past the 64 KiB the header check reads): damage further
    down is met only by the full read."""
    header, _, body = LEVEL1.read_bytes().partition(b"\r\n")
    rows = [line for line in body.split(b"\r\n") if line]
    return header + b"\r\n" + b"\r\n".join(rows * 6) + b"\r\n"


def _binary_row_deep(tmp_path):
    data = _long_level1()
    at = len(data) - 5000
    return _kernel_details(tmp_path, data[:at] + bytes(range(1, 256)) * 8 + data[at:]), "cannot parse as CSV"


def _trace(tmp_path, change):
    trace = json.loads(TRACE.read_text())
    kernel = next(e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel")
    change(kernel)
    path = tmp_path / "profile" / "trace.json"
    path.parent.mkdir()
    path.write_text(json.dumps(trace))
    return path


def _trace_event_without_start(tmp_path):
    return _trace(tmp_path, lambda e: e.pop("ts")), "KeyError: 'ts'"


def _trace_duration_as_text(tmp_path):
    return _trace(tmp_path, lambda e: e.update(dur="abc")), "could not convert string to float: 'abc'"


def _trace_grid_as_text(tmp_path):
    return _trace(tmp_path, lambda e: e.setdefault("args", {}).update(grid=["a", 1])), "ValueError"


def _trace_args_a_list(tmp_path):
    return _trace(tmp_path, lambda e: e.update(args=[1])), "AttributeError"


def _trace_nested_too_deep(tmp_path):
    path = tmp_path / "profile" / "trace.json"
    path.parent.mkdir()
    path.write_text('{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return path, "RecursionError"


def _trace_truncated(tmp_path):
    kept = TRACE.read_bytes()[: len(TRACE.read_bytes()) // 2]
    path = tmp_path / "profile" / "trace.json"
    path.parent.mkdir()
    path.write_bytes(kept)
    # the parser names the line the text stops at: the last line of what is left
    return path, f"line {kept.count(NEWLINE) + 1}: not a readable chrome trace (JSONDecodeError)"


def _ncu_unterminated_quote(tmp_path):
    text = NCU.read_bytes()
    path = tmp_path / "profile" / "ncu_raw_pipe.csv"
    path.parent.mkdir()
    path.write_bytes(text[: len(text) // 3])  # cut inside a quoted cell
    return path, "cannot parse as CSV"


@pytest.mark.parametrize("make", [_binary_row_deep, _trace_event_without_start, _trace_duration_as_text,
                                  _trace_grid_as_text, _trace_args_a_list, _trace_nested_too_deep, _trace_truncated,
                                  _ncu_unterminated_quote], ids=lambda f: f.__name__.strip("_"))
def test_a_damaged_file_is_exit_2_in_one_line_naming_it(tmp_path, make):
    path, problem = make(tmp_path)
    code, out, err = _analyze(path.parent.parent if path.name == "kernel_details.csv" else path.parent)
    assert code == 2, err
    assert out == ""
    assert err.strip().count("\n") == 0, err  # no traceback, no "Exception ignored in" from pyarrow
    assert err.startswith(f"error: {path}") and problem in err, err


def _lone_cr(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\r")


def test_lines_ended_by_a_lone_cr_are_read_like_crlf(tmp_path):
    """Control: not every odd file is damage. Old Mac line ends read as the original does."""
    original = _kernel_details(tmp_path / "a", LEVEL1.read_bytes())
    lone_cr = _kernel_details(tmp_path / "b", _lone_cr(LEVEL1.read_bytes()))
    runs = [subprocess.run([sys.executable, "-m", "ascendopt", "analyze", str(p.parent.parent), "--json"],
                           capture_output=True, text=True, timeout=300, check=False) for p in (original, lone_cr)]
    assert [r.returncode for r in runs] == [0, 0], runs[1].stderr
    payloads = [json.loads(r.stdout)["data"] for r in runs]
    assert [(p["total_us"], p["kernel_count"]) for p in payloads][0] == \
        [(p["total_us"], p["kernel_count"]) for p in payloads][1]


@pytest.mark.parametrize("name, text", [
    ("profiler_info.json", "[1, 2]"),
    ("profiler_info.json", '{"config": [1], "rank_id": "x"}'),
    ("PROF_1/device_0/info.json.0", '{"DeviceInfo": [1]}'),
])
def test_an_optional_facts_file_of_another_shape_is_skipped_like_an_unreadable_one(tmp_path, name, text):
    path = _kernel_details(tmp_path, LEVEL1.read_bytes())
    facts = path.parent.parent / name
    facts.parent.mkdir(parents=True, exist_ok=True)
    facts.write_text(text)
    code, out, err = _analyze(path.parent.parent)
    assert code == 0, err
    assert "Traceback" not in err


def test_every_reader_of_a_file_turns_any_parser_error_into_the_files_fault():
    """The class, not the instances: every ``read_*`` function of the profile readers is wrapped by
    ``faults.reader`` (``read_block_table`` wraps each of its files with ``faults.reading`` itself)."""
    import inspect

    from ascendopt.analyze import traces
    from ascendopt.analyze.traces import ascend, collection, csvread, device, ncu, torch_trace

    unwrapped = [f"{module.__name__}.{name}" for module in (traces, ascend, collection, csvread, device, ncu,
                                                           torch_trace)
                 for name, fn in vars(module).items()
                 if name.startswith("read_") and inspect.isfunction(fn) and fn.__module__ == module.__name__
                 and not hasattr(fn, "__wrapped__") and name != "read_block_table"]
    assert unwrapped == []


def test_the_line_is_taken_from_what_each_parser_says(tmp_path):
    from ascendopt.analyze.traces.faults import fault, line_of

    assert line_of(json.JSONDecodeError("Expecting value", "a\nb\nc", 4)) == 3
    assert line_of(ValueError("Error tokenizing data. C error: Expected 5 fields in line 12, saw 6")) == 12
    assert line_of(ValueError("CSV parse error: Row #7: Expected 3 columns, got 2")) == 7
    assert line_of(ValueError("could not convert string to float: 'abc'")) is None
    path = tmp_path / "f.csv"
    path.write_bytes(b"a,b\n1,2\n\xff,3\n")
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        assert line_of(exc, path) == 3
        message = str(fault(path, exc))
    assert message.startswith(f"{path}: line 3: cannot read this file (UnicodeDecodeError: ") and "\n" not in message
