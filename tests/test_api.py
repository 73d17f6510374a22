"""The public API: one function per command, importable from `divscope`, listed in the README."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

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


def test_the_readme_lists_each_entry_point_with_its_module():
    listed = re.findall(
        r"^- `divscope\.(\w+)\(.*, in `(divscope/[\w/]+)\.py`$", README.read_text(), re.M
    )
    assert [(name, path.replace("/", ".")) for name, path in listed] == list(COMMANDS.items())
