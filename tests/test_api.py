"""The public API: one function per command, importable from `divscope`, listed in the README."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import divscope
from divscope.cli import app

README = Path(__file__).parents[1] / "README.md"
COMMANDS = {
    "score": "scoring",
    "analyze": "analyses",
    "plot": "figures",
    "report": "reporting",
    "generate": "generation",
    "grade": "grading",
    "cross_sample": "decoding",
    "calibrate": "decoding",
    "weights": "scoring",
    "quickstart": "study",
}


@pytest.mark.parametrize("name,package", COMMANDS.items())
def test_each_command_is_a_documented_function_of_divscope(name, package):
    function = getattr(divscope, name)
    assert name in divscope.__all__
    assert function.__module__ == f"divscope.{package}.{name}"
    assert function.__name__ == name
    doc = inspect.getdoc(function)
    assert doc is not None and "Args:" in doc and "Returns:" in doc


def test_every_cli_command_has_its_library_function():
    commands = {command.name for command in app.registered_commands}
    assert {name.replace("_", "-") for name in COMMANDS} == commands


def test_the_readme_lists_each_entry_point_with_its_module():
    listed = re.findall(
        r"^- `divscope\.(\w+)\(.*, in `divscope/(\w+)/(\w+)\.py`$", README.read_text(), re.M
    )
    assert [(name, package, module) for name, package, module in listed] == [
        (name, package, name) for name, package in COMMANDS.items()
    ]
