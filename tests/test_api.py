"""The public API: one function per command, importable from `divscope`; the README lists every
command once."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path

import pytest
import typer.main
from typer.core import TyperGroup

import divscope
from divscope.cli import COMMANDS as GENERATED
from divscope.cli import app
from divscope.cli.lab import COMMANDS as LAB_GENERATED
from divscope.params import LIBRARY_ONLY

README = Path(__file__).parents[1] / "README.md"
# Command -> the module that defines it.
COMMANDS = {
    "score": "divscope.scoring.score",
    "analyze": "divscope.analyses.analyze",
    "plot": "divscope.figures.plot",
    "report": "divscope.reporting.report",
    "generate": "divscope.generation.generate",
    "grade": "divscope.grading.grade",
    "cross_sample": "divscope.decoding.cross_sample",
    "calibrate": "divscope.decoding.calibrate",
    "weights": "divscope.scoring.weights",
    "watch": "divscope.monitor.watch",
    "quickstart": "divscope.lab_study",
    "config": "divscope.study_file",
}


@pytest.mark.parametrize("name,module", COMMANDS.items())
def test_each_command_is_a_documented_function_of_divscope(name, module):
    function = getattr(divscope, name)
    assert name in divscope.__all__
    assert function.__module__ == module
    assert function.__name__ == name
    doc = inspect.getdoc(function)
    assert doc is not None and "Args:" in doc and "Returns:" in doc


def test_every_cli_command_has_its_library_function():
    group = typer.main.get_command(app)
    commands = set(group.list_commands(typer.Context(group))) - {"lab"}
    assert {name.replace("_", "-") for name in COMMANDS} == commands


MAX_OPTION_PARAMETERS = 6
"""Parameters with an option that an entry point takes at most: a few, most of them groups."""


@pytest.mark.parametrize("name", [*GENERATED, *(f"lab {name}" for name in LAB_GENERATED)])
def test_each_generated_command_takes_a_few_parameters(name):
    """An entry point's parameters that have an option (not `LIBRARY_ONLY`) are at most six."""
    command = GENERATED.get(name) or LAB_GENERATED[name.removeprefix("lab ")]
    function = command.function()
    hints = typing.get_type_hints(function, include_extras=True)
    with_option = [
        parameter
        for parameter in inspect.signature(function).parameters
        if LIBRARY_ONLY not in getattr(hints.get(parameter), "__metadata__", ())
    ]
    assert len(with_option) <= MAX_OPTION_PARAMETERS, f"{command.target}: {with_option}"


def test_the_readme_lists_each_command_once():
    """The README's command list (the shell block under `## Commands`) has one line per command
    of the CLI, the lab's included."""
    section = README.read_text(encoding="utf-8").split("\n## Commands\n", 1)[1]
    block = re.search(r"^```bash\n(.*?)^```", section, re.M | re.S)[1]
    cli = typer.main.get_command(app)
    context = typer.Context(cli)
    groups = {
        name: command.list_commands(typer.Context(command, parent=context))
        for name in cli.list_commands(context)
        if isinstance(command := cli.get_command(context, name), TyperGroup)
    }
    commands = [
        f"{name} {sub}" if name in groups else name
        for name in cli.list_commands(context)
        for sub in groups.get(name, [None])
    ]
    listed = []
    for line in block.splitlines():
        program, name, sub, *_ = line.split()
        assert program == "divscope", line
        listed.append(f"{name} {sub}" if name in groups else name)
    assert sorted(listed) == sorted(commands)
