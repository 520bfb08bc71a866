"""mkdocs hook: the CLI reference pages, generated at build time from the commands themselves.

One source: the typer definitions in ``ascendopt.cli`` (``typer.main.get_command(app)``, the click command tree
``--help`` prints). For each command a page ``reference/cli/<command>.md`` with its summary, usage, description,
arguments, options (the same option lines and help ``--help`` prints, defaults included) and its examples; and
``reference/cli/index.md`` with the global options and the command list. Nothing here is written by hand, so the
pages cannot drift from ``--help``.
"""

from __future__ import annotations

import inspect
import re

PAGE_DIR = "reference/cli"
# outside `code spans`: characters Markdown would read as emphasis or HTML
_MARKDOWN_SPECIAL = re.compile(r"([*_<>\[\]])")


def on_config(config):
    """mkdocs event: the nav's ``Commands`` entry becomes the index page followed by one page per command, in
    the CLI's order (so a new command gets its page without touching mkdocs.yml)."""
    from ascendopt.cli import COMMANDS

    index = f"{PAGE_DIR}/index.md"

    def expand(items):
        for i, item in enumerate(items):
            if isinstance(item, dict):
                (title, value), = item.items()
                if value == index:
                    items[i] = {title: [index] + [{name: f"{PAGE_DIR}/{name}.md"} for _, name in COMMANDS]}
                elif isinstance(value, list):
                    expand(value)

    expand(config["nav"])
    return config


def on_files(files, config):
    """mkdocs event: add the generated pages to the site's files (the nav in mkdocs.yml names them)."""
    from mkdocs.structure.files import File

    for name, text in pages().items():
        files.append(File.generated(config, f"{PAGE_DIR}/{name}.md", content=text))
    return files


def pages() -> dict[str, str]:
    """``{page name: Markdown}``: ``index`` and one page per command, in the CLI's order."""
    import typer.main

    from ascendopt.cli import COMMANDS, app

    group = typer.main.get_command(app)
    root = group.context_class(group, info_name="ascendopt")
    out = {"index": _index(group, root, [name for _, name in COMMANDS])}
    for _, name in COMMANDS:
        command = group.commands[name]
        ctx = command.context_class(command, info_name=name, parent=root)
        out[name] = _command_page(f"ascendopt {name}", command, ctx)
    return out


def _index(group, ctx, names: list[str]) -> str:
    lines = ["# Command-line reference", "",
             "Generated from the commands' own definitions (what `ascendopt COMMAND --help` prints).", "",
             "```text", "ascendopt " + " ".join(group.collect_usage_pieces(ctx)), "```", ""]
    lines += _paragraphs(group.help or "")
    lines += ["## Global options", "", "Given before the command (`ascendopt --backend cpu gate`).", ""]
    lines += _options(group, ctx)
    lines += ["## Commands", "", "| command | does |", "|---|---|"]
    for name in names:
        lines.append(f"| [`{name}`]({name}.md) | {_escape(_summary(group.commands[name]))} |")
    lines += [""] + _examples(group)
    return "\n".join(lines) + "\n"


def _command_page(title: str, command, ctx) -> str:
    help_text = inspect.cleandoc(command.help or "")
    summary, _, rest = help_text.partition("\n\n")
    lines = [f"# `{title}`", "", _escape(" ".join(summary.split())), "",
             "```text", f"{title} " + " ".join(command.collect_usage_pieces(ctx)), "```", ""]
    lines += _paragraphs(rest)
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    if arguments:
        lines += ["## Arguments", ""]
        for param in arguments:
            lines += [f"`{param.metavar or param.name.upper()}`", f":   {_escape(param.help or '')}", ""]
    lines += ["## Options", ""] + _options(command, ctx)
    lines += _examples(command)
    return "\n".join(lines) + "\n"


def _examples(command) -> list[str]:
    """The command's ``Examples:`` epilog (``cli.options.examples``) as a bash block."""
    if not command.epilog:
        return []
    body = command.epilog.split("\b", 1)[-1].strip("\n").splitlines()
    return ["## Examples", "", "```bash", *(line.strip() for line in body), "```", ""]


def _options(command, ctx) -> list[str]:
    lines = []
    for param in command.params:
        if param.param_type_name != "option":
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, help_text = record
        lines += [f"`{names}`", f":   {_escape(' '.join(help_text.split()))}", ""]
    return lines


def _summary(command) -> str:
    return " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())


def _paragraphs(text: str) -> list[str]:
    """click's help paragraphs as Markdown: a ``\\b`` paragraph is kept as written (a text block), the others
    are joined into one line each."""
    lines = []
    for para in inspect.cleandoc(text).split("\n\n"):
        if not para.strip():
            continue
        if para.startswith("\b"):
            lines += ["```text", *para[1:].strip("\n").splitlines(), "```", ""]
        else:
            lines += [_escape(" ".join(para.split())), ""]
    return lines


def _escape(text: str) -> str:
    """``text`` safe as Markdown prose: emphasis and HTML characters escaped outside `code spans`."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # even parts are outside code spans
        parts[i] = _MARKDOWN_SPECIAL.sub(r"\\\1", parts[i])
    return "`".join(parts)
