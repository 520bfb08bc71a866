"""Every repository doc that code, configs, fixtures, tests or the README point at exists, with the section cited.

A pointer is a path into the repository's ``docs`` folder ending in ``.md`` (relative forms that climb out of
a fixture folder included), optionally followed by a section sign and a number; the number must be a heading
of that doc (``## 6.`` or ``### 6.2``).
"""

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("src", "tests", "configs", "benchmarks", "tools", "scripts", "docs", ".ci", "README.md")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ""}
# after a start of line, a space, an opening quote or bracket, or "../" (other projects' docs/ folders are not ours)
POINTER = re.compile(r"(?:^|(?<=[\s(`\"'\[:=])|(?<=\.\./))docs/([A-Za-z0-9_./-]+?\.md)(?:`?\s*§\s*(\d+(?:\.\d+)*))?")
HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s")


def _files():
    seen = set()
    for name in SCANNED:
        top = REPO_ROOT / name
        paths = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        for path in paths:
            if not path.is_file() or path.suffix not in SUFFIXES or "__pycache__" in path.parts:
                continue
            real = path.resolve()  # src/ascendopt/configs links to configs/
            if real in seen:
                continue
            seen.add(real)
            yield path


def _pointers():
    for path in _files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary fixtures
        for number, line in enumerate(text.splitlines(), 1):
            for m in POINTER.finditer(line):
                yield path.relative_to(REPO_ROOT), number, m.group(1), m.group(2)


def _sections(doc: Path) -> set[str]:
    out = set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = HEADING.match(line)
        if m:
            out.add(m.group(1))
    return out


def test_doc_pointers_exist():
    pointers = list(_pointers())
    assert pointers, "no doc pointer found at all: the scan is broken"
    problems = []
    sections: dict[str, set[str]] = {}
    for where, line, name, section in pointers:
        doc = REPO_ROOT / "docs" / name
        if not doc.is_file():
            problems.append(f"{where}:{line}: docs/{name} does not exist")
            continue
        if section is None:
            continue
        if name not in sections:
            sections[name] = _sections(doc)
        if section not in sections[name]:
            problems.append(f"{where}:{line}: docs/{name} has no section {section} "
                            f"(its numbered sections: {', '.join(sorted(sections[name])) or 'none'})")
    assert not problems, "broken doc pointers:\n" + "\n".join(problems)
