"""Precision of the rules on labelled real code: each finding judged true or false by a person.

A labels file (CSV: ``path, line, rule, label, reason``; paths relative to the corpus folder) holds one
row per judged finding. ``label`` is ``expected`` (a true finding of a practice-named pattern, which
the rules must keep finding), ``true`` or ``false``. Rows of findings that the rules no longer report
stay in the file: they record what an older version got wrong.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ascendopt.errors import UsageError
from ascendopt.lint.registry import Finding

LABELS = ("expected", "true", "false")


@dataclass(frozen=True)
class Label:
    path: str
    line: int
    rule: str
    label: str  # one of LABELS
    reason: str

    @property
    def key(self) -> tuple[str, int, str]:
        return self.path, self.line, self.rule


@dataclass
class PrecisionReport:
    """Findings of one run scored against the labels; counts per rule id."""

    true: Counter = field(default_factory=Counter)
    false: Counter = field(default_factory=Counter)
    unlabelled: list[tuple[str, int, str]] = field(default_factory=list)  # findings nobody judged yet
    missed: list[Label] = field(default_factory=list)  # expected positions not found

    @property
    def findings(self) -> int:
        return sum(self.true.values()) + sum(self.false.values()) + len(self.unlabelled)

    @property
    def precision(self) -> float:
        """True findings over all findings (an unjudged finding counts as not true); 1.0 with no findings."""
        return sum(self.true.values()) / self.findings if self.findings else 1.0

    def per_rule(self) -> list[tuple[str, int, int, int]]:
        """``(rule, findings, true, false)`` sorted by rule id; unlabelled findings count in findings only."""
        unjudged = Counter(rule for _, _, rule in self.unlabelled)
        rules = sorted(set(self.true) | set(self.false) | set(unjudged))
        return [(r, self.true[r] + self.false[r] + unjudged[r], self.true[r], self.false[r]) for r in rules]


def load_labels(path: str | Path) -> list[Label]:
    """Read a labels CSV; a row with an unknown label or a non-integer line is a UsageError naming it."""
    path = Path(path)
    labels = []
    with path.open(newline="") as fh:
        for number, row in enumerate(csv.DictReader(fh), start=2):
            try:
                label = Label(row["path"], int(row["line"]), row["rule"], row["label"], row.get("reason") or "")
            except (KeyError, TypeError, ValueError) as exc:
                raise UsageError(f"{path}:{number}: not a labels row (path,line,rule,label,reason): {exc}") from None
            if label.label not in LABELS:
                raise UsageError(f"{path}:{number}: label {label.label!r} is not one of {', '.join(LABELS)}")
            labels.append(label)
    return labels


def score(findings: list[Finding], labels: list[Label], root: str | Path) -> PrecisionReport:
    """Judge ``findings`` (paths under ``root``) by ``labels``."""
    by_key = {label.key: label for label in labels}
    report = PrecisionReport()
    found = set()
    for finding in findings:
        key = (Path(finding.path).resolve().relative_to(Path(root).resolve()).as_posix(), finding.line, finding.rule)
        found.add(key)
        label = by_key.get(key)
        if label is None:
            report.unlabelled.append(key)
        elif label.label == "false":
            report.false[finding.rule] += 1
        else:
            report.true[finding.rule] += 1
    report.missed = [label for label in labels if label.label == "expected" and label.key not in found]
    return report
