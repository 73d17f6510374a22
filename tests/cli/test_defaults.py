"""Every option of every command defaults to the library default it stands for.

The library's defaults are read by introspection: the entry point's keyword parameters first,
then the fields of the configuration dataclasses it takes by default (nested ones included).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from typer.main import get_command

import divscope
from divscope.cli import app
from divscope.decoding.settings import parse_budgets
from divscope.lab.family import build

# command -> the library callables its options go to, in the order a name is looked up.
LIBRARY: dict[str, list[Callable[..., Any]]] = {
    "score": [divscope.score],
    "generate": [divscope.generate],
    "grade": [divscope.grade],
    "weights": [divscope.weights],
    "quickstart": [divscope.quickstart],
    "lab build": [build],
}
# Options whose text the CLI parses into the library's value.
PARSED: dict[str, Callable[[str], Any]] = {
    "budgets": parse_budgets,
    "stop": lambda values: tuple(values or ()),
}
# Options with no library counterpart: the lab's smoke build.
CLI_ONLY = {("lab build", "smoke")}


def library_defaults(callables: list[Callable[..., Any]]) -> dict[str, Any]:
    """name -> default: keyword parameters first, then configuration fields, breadth first."""
    found: dict[str, Any] = {}
    configs: list[Any] = []
    for function in callables:
        for name, parameter in inspect.signature(function).parameters.items():
            if parameter.default is inspect.Parameter.empty:
                continue
            found.setdefault(name, parameter.default)
            if dataclasses.is_dataclass(parameter.default):
                configs.append(parameter.default)
    while configs:
        config = configs.pop(0)
        for field in dataclasses.fields(config):
            value = getattr(config, field.name)
            found.setdefault(field.name, value)
            if dataclasses.is_dataclass(value):
                configs.append(value)
    return found


def command(path: str):
    group = get_command(app)
    for name in path.split():
        group = group.commands[name]
    return group


def test_every_command_is_covered():
    group = get_command(app)
    commands = {
        f"{name} {sub}" if hasattr(cmd, "commands") else name
        for name, cmd in group.commands.items()
        for sub in (getattr(cmd, "commands", None) or [None])
    }
    assert commands == set(LIBRARY)


@pytest.mark.parametrize("path", LIBRARY)
def test_option_defaults_are_the_library_defaults(path):
    defaults = library_defaults(LIBRARY[path])
    checked = 0
    for param in command(path).params:
        if param.required or (path, param.name) in CLI_ONLY:
            continue
        name = param.name
        assert name in defaults, f"{path} --{param.name}: no library default to stand for"
        value = param.default
        if param.name in PARSED:
            value = PARSED[param.name](value)
        assert value == defaults[name], f"{path} --{param.name}"
        checked += 1
    assert checked > 0
