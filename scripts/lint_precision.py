"""Precision of `ascendopt lint` on the labelled real Triton-Ascend sources in tests/data/lint_real.

    python scripts/lint_precision.py                       # lint the corpus with this tree's rules
    python scripts/lint_precision.py --findings old.json   # score `ascendopt lint --format json` output
                                                           # (run in tests/data/lint_real) of another version
    python scripts/lint_precision.py --origin vllm-ascend  # one folder of the corpus only

Prints findings, true and false per rule (AO101 left out: it matches keyword names) and the expected
positions that were not found. Exit 0 when precision >= 90 % and nothing expected is missed, else 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ascendopt.lint import lint_paths
from ascendopt.lint.precision import load_labels, score
from ascendopt.lint.registry import Finding

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "lint_real"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--findings", type=Path, help="JSON from `ascendopt lint --format json`, run in --corpus")
    parser.add_argument("--origin", help="only this folder of the corpus (fla-core, flag-gems, vllm-ascend)")
    args = parser.parse_args()
    if args.findings:
        payload = json.loads(args.findings.read_text())
        payload = payload.get("data", payload)
        findings = [Finding(f["rule"], str(args.corpus / f["path"]), f["line"], f["col"], f["message"])
                    for f in payload["findings"] if f["rule"] != "AO101"]
    else:
        findings = lint_paths([args.corpus], ignore="AO101").findings
    labels = load_labels(args.corpus / "labels.csv")
    if args.origin:
        inside = (args.corpus / args.origin).resolve()
        findings = [f for f in findings if Path(f.path).resolve().is_relative_to(inside)]
        labels = [label for label in labels if label.path.startswith(args.origin + "/")]
    report = score(findings, labels, args.corpus)
    print("| rule | findings | true | false |\n|---|---|---|---|")
    for rule, count, true, false in report.per_rule():
        print(f"| {rule} | {count} | {true} | {false} |")
    print(f"| all | {report.findings} | {sum(report.true.values())} | {sum(report.false.values())} |")
    print(f"\nprecision {report.precision:.1%}; unlabelled {len(report.unlabelled)}; "
          f"expected positions missed {len(report.missed)}")
    for path, line, rule in report.unlabelled:
        print(f"  unlabelled: {path}:{line} {rule}")
    for label in report.missed:
        print(f"  missed: {label.path}:{label.line} {label.rule} ({label.reason})")
    return 0 if report.precision >= 0.9 and not report.missed else 1


if __name__ == "__main__":
    sys.exit(main())
