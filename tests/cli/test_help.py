"""``--help`` reads well: values named in words (PATH, NAME=VALUE, N, SECONDS), never a Python type; every
command's summary printed whole in the command list; an "Examples:" block with the command in it.

The help is rendered the way a user sees it (``ascendopt ... --help`` through the CLI's entry point) at 80
columns, the width click formats for on most terminals."""

import re

import pytest

from ascendopt.cli import COMMANDS
from conftest import run_cli

COMMAND_NAMES = [name for _, name in COMMANDS]
# what typer and click print when a parameter has no metavar: <str>, <list[str]>, <int range>, <float>, TEXT, INTEGER
PYTHON_TYPES = re.compile(r"<[a-z][a-z_ \[\],|]*>|\b(?:list|dict|tuple)\[|\b(?:TEXT|INTEGER|FLOAT|BOOLEAN)\b"
                          r"|\b(?:int|float) range\b|\bNoneType\b")


def _help(*args: str, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(*args, "--help")
    assert code == 0, err
    return out


@pytest.mark.parametrize("command", COMMAND_NAMES)
def test_help_names_values_in_words_and_shows_examples(command, monkeypatch):
    text = _help(command, monkeypatch=monkeypatch)
    assert not PYTHON_TYPES.search(text), f"ascendopt {command} --help shows a Python type: " \
                                          f"{PYTHON_TYPES.search(text).group(0)!r}\n{text}"
    usage = text.splitlines()[0]
    assert not re.search(r"[{\[]?[a-z_]+[}\]]?\.\.\.|\{[a-z_]+\}|\[[a-z_]+\]", usage.split("[OPTIONS]")[-1]), usage
    examples = text.split("Examples:", 1)
    assert len(examples) == 2, f"ascendopt {command} --help has no Examples: block\n{text}"
    lines = [line.strip() for line in examples[1].splitlines() if line.strip()]
    assert any(line.startswith(("ascendopt ", "ascendopt --backend")) and f" {command}" in line for line in lines), \
        lines


@pytest.mark.parametrize("command", COMMAND_NAMES)
def test_every_option_that_takes_a_value_has_a_word_for_it(command, monkeypatch):
    """Each option line reads ``--name WORD``: an upper-case metavar (``PATH``, ``NAME=VALUE``, ``N``) or none
    (a flag); the class of a forgotten metavar, whatever type typer would print for it."""
    text = _help(command, monkeypatch=monkeypatch)
    options = text.split("\nOptions:\n", 1)[1].split("\n\n", 1)[0]
    for line in options.splitlines():
        m = re.match(r"\s{2}((?:-\w, )?--[\w-]+(?:, --[\w-]+)*)(?: (\S+))?", line)
        if not m or not m.group(2):
            continue
        word = m.group(2)
        assert re.fullmatch(r"[A-Z][A-Z0-9_=.,:\[\]]*", word), f"ascendopt {command}: {m.group(1)} {word}"


def test_the_command_list_prints_every_summary_whole(monkeypatch):
    """click cuts a summary that does not fit the column with "..."; each command's first docstring paragraph is
    short enough to print whole, and is what the list shows."""
    from typer.main import get_command

    from ascendopt.cli import app

    text = _help(monkeypatch=monkeypatch)
    assert "Examples:" in text.split("\nCommands:\n", 1)[1], text
    listed = dict(re.findall(r"^  ([a-z-]+)\s{2,}(.+)$", text.split("\nCommands:\n", 1)[1], re.MULTILINE))
    assert set(listed) == set(COMMAND_NAMES), listed
    group = get_command(app)
    for name in COMMAND_NAMES:
        summary = " ".join(group.commands[name].help.strip().split("\n\n")[0].split())
        assert listed[name] == summary, f"{name}: listed {listed[name]!r}, its summary is {summary!r}"
        assert not listed[name].endswith("..."), listed[name]
