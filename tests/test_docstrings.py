"""The API documentation stays true: every public function shows a runnable example, and each
command's `--help` says what its library function's docstring says.

The public API is read, not listed: the `__all__` of `divscope`, `divscope.analyses` and
`divscope.figures`; every public name of each module that the README's Python code imports; and
every `divscope.<module>.<function>` the README names. Its examples run under pytest's
`--doctest-modules` (pyproject.toml), from the repository root like the README's commands: the
lab's examples read `fixtures/lab`.

The commands are read from the typer app, so a command added later is checked too. The library
function of `divscope A B` is `divscope.A.B` (`divscope score` is `divscope.score`, `divscope lab
build` is `divscope.lab.build`); its docstring's first paragraph is the command's help summary,
and every option of the command is a parameter documented in its `Args:` (see `OPTIONS` for the
options that reach it another way).
"""

from __future__ import annotations

import ast
import dataclasses
import doctest
import importlib
import importlib.util
import inspect
import re
import textwrap
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from divscope.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PACKAGES = ("divscope", "divscope.analyses", "divscope.figures")

# How an option of a command reaches its library function when the names differ. Every other
# option is the function's parameter of the same name. A target is
# - `param`: that parameter, under another name (grade's `--responses` is `source`);
# - `param.field[.field]`: a field of the dataclass `param` takes, documented under the field
#   (`--top-p` is `config.stats.top_p`, i.e. `ScoreConfig(StatsConfig(top_p=...))`);
OPTIONS: dict[str, dict[str, str]] = {
    "score": {
        "top_p": "config.stats.top_p",
        "temperature": "config.stats.temperature",
        "window": "config.stats.window",
        "batch_tokens": "config.batch_tokens",
        "chunk_rows": "config.chunk_rows",
        "max_memory": "config.max_memory",
        "head_dtype": "config.head_dtype",
    },
    "generate": {
        **{
            name: f"config.sampling.{name}"
            for name in ("n", "temperature", "top_p", "max_new_tokens", "stop", "seed")
        },
        **{
            name: f"config.{name}"
            for name in ("engine", "chat_template", "batch_size", "max_memory")
        },
        **{
            name: f"config.vllm.{name}"
            for name in ("tensor_parallel_size", "gpu_memory_utilization", "max_model_len")
        },
    },
    "grade": {
        "responses": "source",
        "grader": "config.grader",
        "timeout": "config.timeout",
        "workers": "config.workers",
    },
    "lab build": {"smoke": "config"},  # --smoke is `BuildConfig.smoke()`
}  # fmt: skip
TARGET = re.compile(r"^(\w+)((?:\.\w+)+)?$")
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


# ---------------------------------------------------------------- the commands


def commands(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """("lab build", click command) of every command of the app, groups included."""
    command = command or typer.main.get_command(app)
    if path:
        yield " ".join(path), command
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, (*path, name))


COMMANDS = dict(commands())
LEAVES = [name for name, command in COMMANDS.items() if not hasattr(command, "commands")]


def library_object(command: str) -> Any:
    """`divscope A B` -> `divscope.A.B`, the function (or package, for a group) it runs."""
    dotted = ".".join(["divscope", *command.replace("-", "_").split()])
    if importlib.util.find_spec(dotted) is not None:
        return importlib.import_module(dotted)
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def summary(text: str | None) -> str:
    """The first paragraph of a docstring or help text, on one line."""
    return " ".join((text or "").strip().split("\n\n")[0].split())


def documented_args(function: Callable) -> set[str]:
    """The parameters named in the `Args:` section of `function`'s docstring."""
    match = re.search(r"^Args:\n((?:    .*\n|\n)+)", inspect.getdoc(function) + "\n", re.M)
    return set(re.findall(r"^    (\w+)(?: \(.*\))?:", match.group(1), re.M)) if match else set()


def documented_fields(cls: type) -> set[str]:
    """The fields of dataclass `cls` with a docstring under them."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    return {
        node.target.id
        for node, after in zip(body, body[1:], strict=False)
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and isinstance(after.value.value, str)
    }


def target_problem(function: Callable, target: str) -> str | None:
    """Why `target` (see `OPTIONS`) is not a documented parameter of `function`, or None."""
    parameter, fields = TARGET.match(target).groups()
    signature = inspect.signature(function).parameters
    if parameter not in signature or parameter not in documented_args(function):
        return f"{parameter!r} is not a parameter documented in the Args of {function.__name__}"
    value = signature[parameter].default  # a config dataclass: its default instance
    for field in (fields or "").split(".")[1:]:
        cls = type(value)
        if not dataclasses.is_dataclass(cls) or field not in documented_fields(cls):
            return f"{target}: {cls.__name__} has no field {field!r} with a docstring"
        value = getattr(value, field)
    return None


def test_every_command_is_found():
    assert {"score", "cross-sample", "lab", "lab build"} <= set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_help_summary_is_its_docstring_summary(command):
    """`divscope <command> --help` opens with the summary of the library's docstring."""
    expected = summary(inspect.getdoc(library_object(command)))
    assert summary(COMMANDS[command].help) == expected
    shown = CliRunner().invoke(app, [*command.split(), "--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert expected in " ".join(shown.output.split())


@pytest.mark.parametrize("command", LEAVES)
def test_command_options_are_documented_parameters(command):
    """Every option and argument of the command is a parameter documented by its function."""
    function = library_object(command)
    parameters = {p.name for p in COMMANDS[command].params if p.name != "help"}
    mapped = OPTIONS.get(command, {})
    assert set(mapped) <= parameters, (
        f"OPTIONS maps what {command} lacks: {set(mapped) - parameters}"
    )
    problems = {
        name: problem
        for name in sorted(parameters)
        if (problem := target_problem(function, mapped.get(name, name)))
    }
    assert not problems, f"divscope {command}: {problems}"


@pytest.mark.parametrize("command", LEAVES)
def test_command_function_documents_every_parameter(command):
    function = library_object(command)
    missing = set(inspect.signature(function).parameters) - documented_args(function)
    assert not missing, f"{function.__module__}.{function.__name__}: no Args entry for {missing}"
