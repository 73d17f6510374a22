"""The API documentation stays true: every public function shows a runnable example.

The public API is read, not listed: the `__all__` of `divscope`, `divscope.analyses` and
`divscope.figures`; every public name of each module that the README's Python code imports; and
every `divscope.<module>.<function>` the README names. Its examples run under pytest's
`--doctest-modules` (pyproject.toml), from the repository root like the README's commands: the
lab's examples read `fixtures/lab`. (Each command's `--help` is generated from its library
function's docstrings, `divscope.cli.command`, so it cannot say otherwise.)
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import re
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PACKAGES = ("divscope", "divscope.analyses", "divscope.figures")

# Functions whose example may be `+SKIP`, and why: a run too long for the fast tier, tested
# elsewhere. Their example must still call them.
SLOW_EXAMPLES = {
    "divscope.quickstart": "the whole study, over a minute even with fast=True; its own test "
    "runs `divscope quickstart --fast` end to end",
}


# ---------------------------------------------------------------- the public API


def public_names(module_name: str) -> list[str]:
    """A module's public names: its `__all__`, else what it defines without a leading `_`."""
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module_name
    ]


def readme_modules() -> set[str]:
    """The divscope modules that the README's Python code blocks import."""
    modules = set()
    for block in re.findall(r"^```python\n(.*?)^```", README, re.M | re.S):
        for source, names in re.findall(r"^from (divscope[\w.]*) import (.+)$", block, re.M):
            modules.add(source)
            for name in re.findall(r"\w+", names):  # `from divscope import analyses`
                if inspect.ismodule(getattr(importlib.import_module(source), name, None)):
                    modules.add(f"{source}.{name}")
        modules.update(re.findall(r"^import (divscope[\w.]*)$", block, re.M))
    return modules


def readme_functions() -> Iterator[tuple[str, str]]:
    """(module, name) of every `divscope.<module>.<function>` the README names."""
    for dotted in sorted(set(re.findall(r"\b(divscope(?:\.\w+)+)", README))):
        module_name, _, name = dotted.rpartition(".")
        try:
            value = getattr(importlib.import_module(module_name), name, None)
        except ImportError:
            continue  # a module path that names no function (`divscope.io`, ...)
        if inspect.isfunction(value):
            yield module_name, name


def public_api() -> dict[str, Any]:
    """`module.name` -> object, for every public function and class."""
    entries = {
        (module, name)
        for module in (*PACKAGES, *sorted(readme_modules()))
        for name in public_names(module)
    } | set(readme_functions())
    api = {}
    for module, name in sorted(entries):
        value = getattr(importlib.import_module(module), name)
        if inspect.isfunction(value) or inspect.isclass(value):
            api[f"{module}.{name}"] = value
    return api


API = public_api()
FUNCTIONS = {name: value for name, value in API.items() if inspect.isfunction(value)}


def examples(function: Callable, *, skipped: bool = False) -> list[doctest.Example]:
    """The `>>>` examples of `function`'s docstring that doctest collects from its module and
    runs (not skipped, unless `skipped`)."""
    module = importlib.import_module(function.__module__)
    qualified = f"{module.__name__}.{function.__qualname__}"
    return [
        example
        for test in doctest.DocTestFinder().find(module)
        if test.name == qualified
        for example in test.examples
        if skipped or not example.options.get(doctest.SKIP)
    ]


def test_the_public_api_is_found():
    assert len(FUNCTIONS) >= 100  # the three packages' functions alone are over 100
    assert {"divscope.score", "divscope.analyses.sparsity", "divscope.figures.lorenz"} <= set(
        FUNCTIONS
    )
    assert "divscope.io" in readme_modules()  # `from divscope.io import scan_token_table`


def test_pytest_runs_the_package_examples():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert "divscope" in options["ini_options"]["testpaths"]
    assert "--doctest-modules" in options["ini_options"]["addopts"].split()


def test_slow_examples_are_public_functions():
    assert set(SLOW_EXAMPLES) <= set(FUNCTIONS)


@pytest.mark.parametrize("name", sorted(API))
def test_public_name_has_a_docstring(name):
    assert inspect.getdoc(API[name]), f"{name} has no docstring"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_public_function_has_a_runnable_example(name):
    """Its docstring has a `>>>` example, run by `--doctest-modules`, that calls it."""
    function = FUNCTIONS[name]
    shown = examples(function, skipped=name in SLOW_EXAMPLES)
    calls = [e for e in shown if re.search(rf"\b{function.__name__}\(", e.source)]
    assert calls, (
        f"{name}: no runnable `>>>` example calls {function.__name__}() (a doctest of "
        f"{function.__module__} without +SKIP; use the lab in fixtures/lab for a model)"
    )
