"""Precision of the rules on real Triton-Ascend code that the project did not write (tests/data/lint_real,
labelled by hand in labels.csv): at least 90 % of findings true, every expected position found, and no
finding left unjudged."""

from pathlib import Path

import pytest

from ascendopt.errors import UsageError
from ascendopt.lint import lint_paths
from ascendopt.lint.precision import load_labels, score
from ascendopt.lint.registry import Finding

CORPUS = Path(__file__).resolve().parent.parent / "data" / "lint_real"
MIN_PRECISION = 0.90


@pytest.fixture(scope="module")
def report():
    findings = lint_paths([CORPUS], ignore="AO101").findings  # AO101 matches keyword names: not judged here
    return score(findings, load_labels(CORPUS / "labels.csv"), CORPUS)


def test_every_finding_on_real_code_is_judged(report):
    shown = "\n".join(f"{p}:{line} {rule}" for p, line, rule in report.unlabelled)
    assert not report.unlabelled, f"label these findings in {CORPUS / 'labels.csv'}:\n{shown}"


def test_precision_on_real_code(report):
    table = "\n".join(f"{rule}: {n} findings, {t} true, {f} false" for rule, n, t, f in report.per_rule())
    assert report.findings >= 30, "the corpus must give the rules something to be judged on"
    assert report.precision >= MIN_PRECISION, table


def test_every_expected_pattern_is_found(report):
    shown = "\n".join(f"{m.path}:{m.line} {m.rule} ({m.reason})" for m in report.missed)
    assert not report.missed, shown


def test_labels_cover_the_practice_patterns():
    # the labelled corpus holds instances of each practice-named pattern the rules were fixed to find
    expected = {label.rule for label in load_labels(CORPUS / "labels.csv") if label.label == "expected"}
    assert {"AO103", "AO203", "AO204", "AO205", "AO302", "AO304", "AO401"} <= expected


def test_every_copied_file_has_its_licence_and_provenance():
    readme = (CORPUS / "README.md").read_text()
    for origin in ("fla-core", "flag-gems", "vllm-ascend"):
        assert (CORPUS / origin / "LICENSE").is_file()
        for path in sorted((CORPUS / origin).rglob("*.py")):
            assert f"./{path.relative_to(CORPUS).as_posix()}" in readme, f"{path} has no provenance entry"


def test_score_counts_false_and_missed(tmp_path):
    # the scoring itself can fail: a false finding lowers precision, a lost expected position is reported
    labels = tmp_path / "labels.csv"
    labels.write_text("path,line,rule,label,reason\na.py,3,AO203,false,x\na.py,9,AO205,expected,y\n")
    found = [Finding("AO203", str(tmp_path / "a.py"), 3, 1, "m"), Finding("AO401", str(tmp_path / "a.py"), 5, 1, "m")]
    result = score(found, load_labels(labels), tmp_path)
    assert (result.findings, result.precision) == (2, 0.0)
    assert result.unlabelled == [("a.py", 5, "AO401")]
    assert [m.line for m in result.missed] == [9]


def test_bad_labels_row_is_a_usage_error(tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text("path,line,rule,label,reason\na.py,3,AO203,maybe,x\n")
    with pytest.raises(UsageError, match="labels.csv:2"):
        load_labels(labels)
