"""Every repository doc that code, configs, fixtures, tests or the README point at exists, with the section cited;
and the manual (mkdocs.yml, docs/) builds in strict mode with a page per command.

A pointer is a path into the repository's ``docs`` folder ending in ``.md`` (relative forms that climb out of
a fixture folder included), optionally followed by a section sign and a number; the number must be a heading
of that doc (``## 6.`` or ``### 6.2``).
"""

import os
import re
import shutil
import subprocess
import sys
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


# --- the manual: the site under docs/ builds strictly, and its command pages come from the commands ------------------

def _build_site(config_dir: Path, site_dir: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config_dir/mkdocs.yml`` (run from ``config_dir``: README sections and
    benchmarks/RESULTS.md are included relative to it)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", "mkdocs.yml",
                           "--site-dir", str(site_dir)], cwd=config_dir, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_manual_builds_strictly_with_a_page_per_command(tmp_path):
    from ascendopt.cli import COMMANDS

    proc = _build_site(REPO_ROOT, tmp_path / "site")
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}{proc.stderr[-6000:]}"
    for _, name in COMMANDS:  # generated from the typer definitions: the options and examples --help prints
        page = (tmp_path / "site" / "reference" / "cli" / name / "index.html").read_text(encoding="utf-8")
        assert "Examples" in page and f"ascendopt {name}" in page, name
    freeze = (tmp_path / "site" / "reference" / "cli" / "freeze" / "index.html").read_text(encoding="utf-8")
    assert "--exec-file PATH" in freeze and "--kernel-filter SUBSTRING" in freeze
    # the pages that include README sections and benchmarks/RESULTS.md got their text
    own = (tmp_path / "site" / "own-code" / "index.html").read_text(encoding="utf-8")
    assert "Keep or revert, and commit the ledger" in own and "--8&lt;--" not in own and "--8<--" not in own
    results = (tmp_path / "site" / "results" / "index.html").read_text(encoding="utf-8")
    assert "How the times were taken" in results


def test_the_strict_build_fails_on_a_broken_link(tmp_path):
    """Control: the same configuration with one link to a page that does not exist does not build, so a green
    build means the links hold (not a lenient configuration)."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copy(REPO_ROOT / "README.md", copy / "README.md")
    (copy / "benchmarks").mkdir()
    shutil.copy(REPO_ROOT / "benchmarks" / "RESULTS.md", copy / "benchmarks" / "RESULTS.md")
    glossary = copy / "docs" / "reference" / "glossary.md"
    glossary.write_text(glossary.read_text(encoding="utf-8") + "\nSee [the missing page](no-such-page.md).\n",
                        encoding="utf-8")
    proc = _build_site(copy, tmp_path / "site")
    assert proc.returncode != 0 and "no-such-page.md" in proc.stdout + proc.stderr, proc.stderr[-3000:]


def test_the_readme_stays_short():
    """The README is the short manual (issue 31: at most 250 lines); the reference lives in the site."""
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move reference prose into docs/"


def test_the_command_pages_cover_every_option_and_argument():
    """The reference is generated from the click tree: every option spelling, metavar and argument of every
    command is on its page, and the examples are the ones ``--help`` prints."""
    import importlib.util

    import typer.main

    from ascendopt.cli import COMMANDS, app

    spec = importlib.util.spec_from_file_location("cli_reference", REPO_ROOT / "docs" / "hooks" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pages = module.pages()
    assert set(pages) == {"index"} | {name for _, name in COMMANDS}
    group = typer.main.get_command(app)
    for _, name in COMMANDS:
        command = group.commands[name]
        for param in command.params:
            for spelling in [*param.opts, *param.secondary_opts] if param.param_type_name == "option" else []:
                assert spelling in pages[name], f"{name}: {spelling} missing from its reference page"
            if param.metavar:
                assert param.metavar in pages[name], f"{name}: {param.metavar} missing"
        examples = [line.strip() for line in command.epilog.split("\b", 1)[1].splitlines() if line.strip()]
        assert examples and all(line in pages[name] for line in examples), name
    for option in group.params:
        assert option.opts[0] in pages["index"]
