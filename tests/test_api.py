"""The public API: one function per command, importable from `divscope`; the README lists every
command once."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import typer.main

import divscope
from divscope.cli import app

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
    "quickstart": "divscope.lab_study",
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
    commands = {command.name for command in app.registered_commands}
    assert {name.replace("_", "-") for name in COMMANDS} == commands


def test_the_readme_lists_each_command_once():
    """The README's command list (the shell block under `## Commands`) has one line per command
    of the CLI, the lab's included."""
    section = README.read_text(encoding="utf-8").split("\n## Commands\n", 1)[1]
    block = re.search(r"^```bash\n(.*?)^```", section, re.M | re.S)[1]
    cli = typer.main.get_command(app)
    commands = [
        f"{name} {sub}" if hasattr(command, "commands") else name
        for name, command in cli.commands.items()
        for sub in getattr(command, "commands", [None])
    ]
    listed = []
    for line in block.splitlines():
        program, name, sub, *_ = line.split()
        assert program == "divscope", line
        listed.append(f"{name} {sub}" if hasattr(cli.commands[name], "commands") else name)
    assert sorted(listed) == sorted(commands)
