"""Side by side with msprof-analyze's advisor: is every kernel it calls bound classified by ascendopt?

For each real torch_npu profile in tests/data/ascend/ this runs ``msprof-analyze advisor computation`` (from
PyPI, in its own scratch environment) and ``ascendopt analyze`` on the same ``kernel_details.csv``, then
lists every (kernel, input shape) the advisor reports as bound with ascendopt's verdict for that kernel and
shape, and the advisor's AI CPU and shape-affinity findings with ascendopt's. The check passes when every
advisor-bound kernel gets a pipe class from ascendopt (the same class, or another one with its evidence) or
a stated reason. Exit 0 pass, 1 when an advisor-bound kernel is left unclassified without a reason, 5 when
the advisor environment is missing.

Setup once (outside every repo; the advisor needs openpyxl only to read its own xlsx back here)::

    python3 -m venv /work/scratch/analyze-rules/venv
    /work/scratch/analyze-rules/venv/bin/pip install msprof-analyze==26.2.0 openpyxl

Run (ascendopt's environment)::

    python benchmarks/advisor_compare.py --advisor-venv /work/scratch/analyze-rules/venv [--json OUT.json]

The script also runs inside the advisor's environment as ``--read-xlsx FILE`` (stdlib + openpyxl only),
which prints the advisor's workbook as JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ASCEND = ROOT / "tests" / "data" / "ascend"
# torch_npu profiles (kernel_details.csv); advisor_pipe is the advisor's own semi-synthetic unit-test data
PROFILES = ("level1_cnn", "level0_cnn", "memory_l0", "advisor_pipe")
ADVISOR_TIMEOUT_S = 300
BOUND_LINE = re.compile(r"^(?P<name>\S+) Op shape: (?P<shape>.*?) dtype: (?P<dtype>.*?) bound type: "
                        r"(?P<bound>\S+?)(?:_bound)? bound$")
AFFINITY_LINE = re.compile(r"^(?P<name>\S+) Op shape: (?P<shape>.*?) dtype: .*? with disaffection "
                           r"characteristics: (?P<why>.*)$")
# advisor bound label (per section) -> ascendopt classes that say the same thing
SAME = {
    "mac": {"cube_bound", "compute_memory_tie"},
    "mte2": {"mte2_bound", "compute_memory_tie"},
    "mac_and_mte2": {"compute_memory_tie"},
    "vec": {"vector_bound", "compute_memory_tie"},
    "mte3": {"mte3_bound"},
    "fixpipe": {"mte1_fixpipe_bound"},
    "vec_mte2_mte3": {"memory_combined_bound", "mte2_bound", "mte3_bound", "vector_bound", "compute_memory_tie"},
}
FA_SAME = {"mac": SAME["mte2"]}  # fa_operators labels aic_mte2_ratio >= 0.8 "mac" (sic)
NOT_A_CLASS = {"no_counters", "no_dominant_pipe", "latency_bound"}


def read_xlsx(path: str) -> None:
    """(advisor environment) print every sheet of the advisor's workbook as {sheet: [[cell, ...], ...]}."""
    import openpyxl

    book = openpyxl.load_workbook(path, read_only=True)
    print(json.dumps({ws.title: [list(row) for row in ws.iter_rows(values_only=True)] for ws in book.worksheets},
                     default=str))


def run_advisor(venv: Path, profile: str, scratch: Path) -> dict[str, Any]:
    """Stage ``profile`` as rank0_ascend_pt/ASCEND_PROFILER_OUTPUT, run the advisor, return its workbook."""
    run = scratch / profile / "rank0_ascend_pt"
    shutil.copytree(ASCEND / profile / "ASCEND_PROFILER_OUTPUT", run / "ASCEND_PROFILER_OUTPUT")
    out = scratch / profile / "advisor_out"
    cmd = [str(venv / "bin" / "msprof-analyze"), "advisor", "computation", "-d", str(run), "-o", str(out), "-l", "en"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=ADVISOR_TIMEOUT_S, check=False)
    books = sorted((out / "log").glob("mstt_advisor_*.xlsx"))
    if proc.returncode or not books:
        raise RuntimeError(f"{profile}: advisor exit {proc.returncode}, no workbook: {proc.stderr[-400:]}")
    read = subprocess.run([str(venv / "bin" / "python"), __file__, "--read-xlsx", str(books[-1])],
                          capture_output=True, text=True, timeout=ADVISOR_TIMEOUT_S, check=True)
    return json.loads(read.stdout)


def advisor_findings(book: dict[str, Any]) -> dict[str, Any]:
    """Bound (name, shape, label, section), unaffine (name, shape, why) and AI CPU op names of one workbook."""
    bound, unaffine, aicpu = [], [], []
    for sheet, rows in book.items():
        if sheet.endswith("Operator Perf Analysis"):
            for row in rows[1:]:
                kind, text = (row + [None, None])[:2]
                for line in str(text or "").splitlines():
                    m = BOUND_LINE.match(line.strip()) if kind == "set of bound operators" else None
                    if m:
                        bound.append({**m.groupdict(), "section": sheet})
                    m = AFFINITY_LINE.match(line.strip()) if kind == "set of unaffine operators" else None
                    if m:
                        unaffine.append(m.groupdict())
        elif sheet == "AICPU Issues":
            aicpu = [r[0] for r in rows[1:] if r and r[0]]
    problems = [r[0] for r in book.get("problems", [])[1:] if r]
    return {"bound": bound, "unaffine": unaffine, "aicpu": aicpu, "problems": problems}


def _shape_key(text: str) -> str:
    return text.strip().strip('"').strip()


def _text(ev: dict[str, Any]) -> str:
    return ev.get("text") or f"{ev['column']} {ev['value']} {ev['op']} {ev['threshold']}"


def verdict(entry: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """ascendopt's verdict on one advisor-bound (name, shape): status, ascendopt class(es), reason."""
    kernels = [k for k in report["kernels"] if k["name"] == entry["name"]]
    if not kernels:
        return {"status": "MISSING", "ascendopt": "-", "reason": "kernel not in ascendopt's report"}
    k = kernels[0]
    same = (FA_SAME if entry["section"].startswith("FA") else {}).get(entry["bound"]) or SAME.get(entry["bound"], set())
    shape = next((s for s in k.get("shapes", []) if s["input_shapes"] == _shape_key(entry["shape"])), None)
    lead = shape["bound"] if shape else k["bound"]
    fired = {f["class"] for f in k["findings"]} if not shape else {lead}
    where = f"shape {shape['input_shapes']}" if shape else "kernel"
    if lead in same:
        return {"status": "same class", "ascendopt": f"{lead} ({where})", "reason": ""}
    if fired & same:
        lead_ev = next((_text(e) for f in k["findings"] if f["class"] == lead for e in f["evidence"]), "")
        return {"status": "bound, other class leads", "ascendopt": f"{lead} + {', '.join(sorted(fired & same))}",
                "reason": f"{lead} is further past its bound: {lead_ev}"}
    if lead not in NOT_A_CLASS:
        ev = (shape or {}).get("evidence") or next((f["evidence"] for f in k["findings"] if f["class"] == lead), [])
        return {"status": "bound, other class", "ascendopt": f"{lead} ({where})",
                "reason": "; ".join(_text(e) for e in ev[:2])}
    if lead == "latency_bound":
        return {"status": "reason stated", "ascendopt": lead,
                "reason": f"mean {k['avg_us']:.1f} us < 20 us: launch/latency dominated"}
    return {"status": "UNCLASSIFIED", "ascendopt": lead, "reason": ""}


def compare(venv: Path) -> list[dict[str, Any]]:
    from ascendopt.analyze.diagnosis import analyze
    from ascendopt.analyze.traces import load_profile

    results = []
    with tempfile.TemporaryDirectory(prefix="advisor_compare_") as tmp:
        for profile in PROFILES:
            found = advisor_findings(run_advisor(venv, profile, Path(tmp)))
            report = analyze(load_profile(ASCEND / profile), top=None)
            rows = [{**b, **verdict(b, report)} for b in found["bound"]]
            # .get: the script also runs against ascendopt versions from before these checks (the "before" column)
            ours_affinity = {(k["name"], a["input_shapes"]) for k in report["kernels"] for a in k.get("affinity", [])}
            affinity = [{**u, "ascendopt": (u["name"], _shape_key(u["shape"])) in ours_affinity}
                        for u in found["unaffine"]]
            ours_cpu = {k["name"] for k in report.get("ai_cpu", {}).get("long", [])}
            aicpu = [{"name": n, "ascendopt": n in ours_cpu} for n in found["aicpu"]]
            results.append({"profile": profile, "problems": found["problems"], "bound": rows, "affinity": affinity,
                            "aicpu": aicpu, "dynamic_shape": report.get("dynamic_shape")})
    return results


def render(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        lines.append(f"### {r['profile']}\n")
        lines.append(f"advisor problems: {', '.join(r['problems']) or 'none'}\n")
        if r["bound"]:
            lines.append("| advisor-bound kernel | shape | advisor | ascendopt | status | reason |")
            lines.append("|---|---|---|---|---|---|")
            for b in r["bound"]:
                shape = b["shape"] if len(b["shape"]) <= 40 else b["shape"][:37] + "..."
                lines.append(f"| `{b['name']}` | `{shape}` | {b['bound']} ({b['section'].split()[0]}) | "
                             f"{b['ascendopt']} | {b['status']} | {b['reason'].replace('|', '/')} |")
        else:
            lines.append("advisor-bound kernels: none")
        for a in r["affinity"]:
            lines.append(f"\nadvisor unaffine: `{a['name']}` `{a['shape'][:40]}` ({a['why']}): "
                         f"ascendopt {'flags it' if a['ascendopt'] else 'MISSES it'}")
        for c in r["aicpu"]:
            lines.append(f"\nadvisor AI CPU: `{c['name']}`: ascendopt {'lists it' if c['ascendopt'] else 'MISSES it'}")
        dyn = r["dynamic_shape"]
        lines.append("\nascendopt dynamic shape: " + ("no OP State column: no verdict" if dyn is None else
                                                        f"{dyn['dynamic']} of {dyn['launches']} launches dynamic"))
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--advisor-venv", type=Path, default=Path("/work/scratch/analyze-rules/venv"))
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--read-xlsx", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.read_xlsx:
        read_xlsx(args.read_xlsx)
        return 0
    if not (args.advisor_venv / "bin" / "msprof-analyze").is_file():
        print(f"advisor_compare: {args.advisor_venv}/bin/msprof-analyze not found; see the setup in this "
              "script's docstring", file=sys.stderr)
        return 5
    results = compare(args.advisor_venv)
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    bad = [(r["profile"], b["name"]) for r in results for b in r["bound"] if b["status"] in ("UNCLASSIFIED", "MISSING")]
    missed = [(r["profile"], x["name"]) for r in results for x in r["affinity"] + r["aicpu"] if not x["ascendopt"]]
    total = sum(len(r["bound"]) for r in results)
    print(f"advisor-bound (kernel, shape) pairs: {total}; unclassified by ascendopt without a reason: {len(bad)}"
          + (f" {bad}" if bad else "") + f"; advisor AI CPU / affinity findings ascendopt misses: {len(missed)}"
          + (f" {missed}" if missed else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
