"""Every command's `--help` says what the code says: each option's text whole, as its field
docstring or `Args:` entry has it (no `[...]` taken for markup), and an example command line
that parses and that docs/commands.md shows."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from click.testing import Result
from typer.main import get_command
from typer.testing import CliRunner

from divscope.cli import COMMANDS, app
from divscope.cli import lab as lab_cli
from divscope.cli.command import Command, leaves, summary

ROOT = Path(__file__).resolve().parents[2]
GENERATED: dict[str, Command] = {
    **COMMANDS,
    **{f"lab {name}": command for name, command in lab_cli.COMMANDS.items()},
}
"""Every generated command, by its command line (`lab build`)."""
BORDERS = re.compile("[\u2500-\u257f]")
"""Box-drawing characters: the panels of typer's rich help, were it ever on."""
HYPHEN_BREAK = re.compile(r"(?<=\w-)[ \t]*\n\s*(?=\w)")
"""A line that click's wrapping broke after a word's hyphen (`--cross-` / `sample`)."""


def normalized(text: str) -> str:
    """`text` as one line: panels' borders dropped, words broken at a hyphen rejoined, every run
    of whitespace one space (the help's wrapping and indentation undone)."""
    return " ".join(HYPHEN_BREAK.sub("", BORDERS.sub("", text)).split())


def shell_words(line: str) -> list[str]:
    """The words of the shell line `line`, ` \\` continuations joined, comments dropped."""
    return shlex.split(line.replace("\\\n", " "), comments=True)


@pytest.fixture(scope="module")
def rendered() -> dict[str, Result]:
    """The `--help` of every generated command, rendered on a wide terminal."""
    runner = CliRunner()
    return {
        name: runner.invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"})
        for name in GENERATED
    }


def help_text(rendered: dict[str, Result], name: str) -> str:
    """The help of `name` as rendered; fails with the error if it could not be rendered."""
    result = rendered[name]
    assert result.exit_code == 0, f"divscope {name} --help: {result.exception!r}"
    return result.output


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_the_help_shows_every_option_text_whole(name, rendered):
    """The summary and each option's help, from the docstrings, are in the rendered help with
    every character: the lost text of `--device-map`'s `'divscope[big]'` or `--chunk-rows`'
    `[rows, V]` (rich markup) fails here."""
    function = GENERATED[name].function()
    shown = normalized(help_text(rendered, name))
    texts = {"(summary)": summary(function), **{o.name: o.help for o in leaves(function)}}
    lost = {option: text for option, text in texts.items() if normalized(text) not in shown}
    assert not lost, f"divscope {name} --help lost text of: {lost}"


def test_the_check_sees_bracketed_text():
    """The options that lost text to rich markup are among those checked, with their brackets."""
    texts = {o.name: o.help for o in leaves(COMMANDS["score"].function())}
    assert "'divscope[big]'" in texts["device_map"]
    assert "[rows, V]" in texts["chunk_rows"]


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_the_help_ends_with_an_example_that_parses(name, rendered):
    example = GENERATED[name].example
    words = shell_words(example)
    assert words[: 1 + len(name.split())] == ["divscope", *name.split()], example
    # The epilog, indented as click indents it.
    epilog = "\n  Example:\n" + "\n".join("    " + line for line in example.splitlines())
    assert help_text(rendered, name).rstrip().endswith(epilog)
    group = get_command(app)
    command = group
    context = typer.Context(group)
    for word in name.split():
        command = command.get_command(context, word)
        context = typer.Context(command, parent=context)
    command.make_context(f"divscope {name}", words[1 + len(name.split()) :])  # usage errors raise


def test_every_example_is_a_command_of_the_commands_page():
    text = (ROOT / "docs/commands.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```(?:bash)?\n(.*?)^```", text, re.M | re.S)
    shown = {
        tuple(shell_words(line))
        for block in blocks
        for line in block.replace("\\\n", " ").splitlines()
        if line.startswith("divscope ")
    }
    missing = [name for name, c in GENERATED.items() if tuple(shell_words(c.example)) not in shown]
    assert not missing, f"examples docs/commands.md does not show: {missing}"
