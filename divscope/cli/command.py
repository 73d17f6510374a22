"""Commands generated from the library's signatures: one home for each option.

`command(function)` reads the entry point's signature. Each plain parameter becomes an option
(or, with `Flag(argument=True)` or when positional, an argument); each parameter whose type is
a frozen dataclass (`ModelPair`, `PartedOutput`, `ScoreConfig`...) is flattened into one
option per field, nested dataclasses included. An option's name is the field's (`_` -> `-`,
or `Flag` names), its default is the field's default (or that of the parameter's default
instance), and its help is the field's docstring or the function's `Args:` entry. Running the
command rebuilds the dataclasses from the options and calls the function; `present` then prints
what it returned.

Every command also takes `--config STUDY.toml` (`divscope.study_file`): the file's values become
the command's defaults (click's `default_map`: its section, then its top-level keys, and options
given on the command line win), after each key is checked against the command's options
(`study_defaults`). A run records its invocation, the command and each option's value as
resolved (`Flag(replay=False)` options left out), in the outputs it writes
(`divscope.output.recording`).

We chose a small adaptor over typer, not jsonargparse: the command line keeps click's syntax
(bare boolean flags, repeated options), so every documented command line still parses as it
did, and the help is still click's.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import os
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import typer

from divscope.errors import DivscopeError
from divscope.output import recording
from divscope.params import Flag
from divscope.study_file import read_study

SECTION = re.compile(
    r"^(Args|Arguments|Returns|Yields|Raises|Example|Examples|Note|Notes)\b.*:\s*$"
)
STUDY = "config_file"
"""The parameter of `--config`, which every generated command has."""
CONTEXT = "typer_context"
"""The parameter of every generated command that typer gives its context."""


@dataclass(frozen=True)
class Option:
    """One leaf of a command's parameters: a plain parameter, or a field of a group."""

    path: tuple[str, ...]
    """Where the value goes: (parameter,) or (parameter, field, field...)."""
    kind: Any
    """The value's type, without `Annotated`."""
    flag: Flag
    default: Any
    """The default value; `inspect.Parameter.empty` when the option is required."""
    help: str

    @property
    def name(self) -> str:
        """The parameter name of the generated function: the leaf's name."""
        return self.path[-1]

    def parameter(self) -> inspect.Parameter:
        """The typer parameter of this option, as an annotated keyword parameter."""
        kind, default, extra = _path_like(self.kind), self.default, {}
        required = default is inspect.Parameter.empty
        if self.flag.parse is not None:
            kind = str if required else str | None
            if not required:
                extra["show_default"] = False if default is None else _text(default)
                default = None
        elif _origin(kind) is tuple:
            item = _path_like(_items(kind))
            kind = list[item] | None
            if not required:
                extra["show_default"] = _text(default) if default else False
                default = None
        info: typer.models.ParameterInfo
        if self.flag.argument:
            info = typer.Argument(help=self.help, metavar=self.flag.metavar, **extra)
        else:
            names = self.flag.names or ("--" + self.name.replace("_", "-"),)
            info = typer.Option(
                *names,
                help=self.help,
                min=self.flag.min,
                max=self.flag.max,
                metavar=self.flag.metavar,
                **extra,
            )
        return inspect.Parameter(
            self.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=default,
            annotation=Annotated[kind, info],
        )

    @property
    def key(self) -> str:
        """The option's name in a study file and an invocation: its first long name without
        `--` (`top-p`), an argument's name with `-` (`out-dir`)."""
        long = [name[2:] for name in self.flag.names if name.startswith("--")]
        return long[0] if long else self.name.replace("_", "-")

    def recorded(self, given: Any) -> Any:
        """What the command line gave, with the default where it gave nothing, as a study file
        writes it (the text of a parsed option, a list for a repeated one, a path's text)."""
        if given is None and self.default is not inspect.Parameter.empty:
            given = self.default
            if self.flag.parse is not None and given is not None:
                given = _text(given)
        return _plain(given)

    def value(self, given: Any) -> Any:
        """The library's value of what the command line gave."""
        if self.flag.parse is not None:
            return self.default if given is None else self.flag.parse(given)
        if _origin(self.kind) is tuple:
            return self.default if given is None else tuple(given)
        if self.kind is Path and isinstance(given, str):
            return Path(given)  # a study file's value: typer < 0.27 leaves it a string
        return given


@dataclass(frozen=True)
class Command:
    """A command of the app: the library entry point it runs, named by its import path so that
    `divscope --help` imports none of them, how its outcome is printed, and an example."""

    target: str
    """The entry point, `module:function`."""
    present: Callable[[Any, dict[str, Any]], None] | None = None
    """Called with what the entry point returned and the arguments it was called with, to
    print the outcome; None prints nothing."""
    passed: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Values the command passes to library-only parameters, e.g. a progress callback."""
    example: str = dataclasses.field(kw_only=True)
    """One command line to run, as docs/commands.md shows it (a long one continued with ` \\`
    and an indented line); the end of the command's help."""

    def function(self) -> Callable[..., Any]:
        """The entry point, imported."""
        module, name = self.target.split(":")
        return getattr(importlib.import_module(module), name)

    def summary(self) -> str:
        """The first line of the entry point's docstring, read from its source (no import: not
        even of its packages, whose `__init__` may import torch)."""
        module, name = self.target.split(":")
        top, *inner = module.split(".")
        spec = importlib.util.find_spec(top)
        path = Path(list(spec.submodule_search_locations)[0], *inner)  # type: ignore[union-attr]
        source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                paragraph = (ast.get_docstring(node) or "").split("\n\n", 1)[0]
                return " ".join(paragraph.split())
        raise TypeError(f"{self.target}: no such function")

    def epilog(self) -> str:
        """The end of the command's help: `example` under `Example:`, its lines kept as written
        (click's `\\b`: never rewrapped).

        >>> Command("m:f", example="divscope f x -o y").epilog().split("\\n")[1:]
        ['Example:', '  divscope f x -o y']
        """
        return "\b\nExample:\n" + textwrap.indent(self.example, "  ")

    def callback(self) -> Callable[..., None]:
        """A function for typer: the options rebuilt into the entry point's parameters."""
        return command(self.function(), self.present, self.passed)


def command(
    function: Callable[..., Any],
    present: Callable[[Any, dict[str, Any]], None] | None = None,
    passed: Mapping[str, Any] | None = None,
) -> Callable[..., None]:
    """A typer command that calls `function` with the options rebuilt into its parameters.

    Args:
        function: a library entry point, documented in Google style.
        present: called with what `function` returned and the arguments it was called with,
            to print the outcome; None prints nothing.
        passed: values of `function`'s library-only parameters (a progress callback).

    Returns:
        A function for `app.command(...)`, with the signature typer reads and the help of
        `function`'s summary.

    Raises:
        TypeError: two options with one name, or a parameter without an option or a default.

    >>> from divscope.params import Output
    >>> def save(text: str, out: Output) -> str:
    ...     '''Save a text.
    ...
    ...     Args:
    ...         text: what to save.
    ...         out: where.
    ...     '''
    ...     return f"{text} -> {out.path} (overwrite={out.overwrite})"
    >>> from typer.testing import CliRunner
    >>> app = typer.Typer()
    >>> _ = app.command()(command(save, lambda result, args: typer.echo(result)))
    >>> CliRunner().invoke(app, ["hello", "--out", "x.txt", "--overwrite"]).output
    'hello -> x.txt (overwrite=True)\\n'
    """
    options = leaves(function)
    names = [o.name for o in options] + [STUDY, CONTEXT]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TypeError(f"{function.__qualname__}: options named twice: {', '.join(twice)}")
    signature = inspect.signature(function)

    def run(**given: Any) -> None:
        given.pop(STUDY)
        context = given.pop(CONTEXT)
        values = {o.path: o.value(given[o.name]) for o in options}
        arguments = _assemble(function, signature, values)
        invocation = {
            "command": " ".join(command_path(context)),
            "options": {o.key: o.recorded(given[o.name]) for o in options if o.flag.replay},
        }
        with recording(invocation):
            result = function(**arguments, **(passed or {}))
        if present is not None:
            present(result, arguments)

    parameters = [o.parameter() for o in options] + [
        _study_parameter(),
        inspect.Parameter(CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context),
    ]
    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {}
    run.__doc__ = summary(function)
    run.__name__ = function.__name__
    run.__module__ = function.__module__
    return run


def _study_parameter() -> inspect.Parameter:
    """`--config STUDY.toml`: read first (eager), it sets the defaults of the other options."""

    def load(ctx: typer.Context, value: Path | None) -> Path | None:
        if value is not None:
            study = study_defaults(read_study(value), str(value), ctx)
            ctx.default_map = {**(ctx.default_map or {}), **study}
            for param in ctx.command.params:
                if param.name in _variadic_from_study(ctx):
                    param.required, param.callback = False, _study_value(param.callback)
        return value

    info = typer.Option(
        "--config",
        help="A study file (TOML) of option values: a section per command ([score]) and shared "
        "keys at the top; options given here win. `divscope config OUT` writes the one that "
        "replays OUT.",
        metavar="STUDY.toml",
        is_eager=True,
        callback=load,
        show_default=False,
    )
    return inspect.Parameter(
        STUDY, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Path | None, info]
    )


def command_path(ctx: typer.Context) -> list[str]:
    """The names that lead from the app to `ctx`'s command (`["lab", "build"]`)."""
    names = []
    while ctx.parent is not None:
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    return names


def _variadic_from_study(ctx: typer.Context) -> list[str]:
    """The variadic arguments (`weights`' models) that the study file gives: click < 8.2
    (typer < 0.29) reads no default for them, so they are made optional once the file is read
    and take its value where the command line gives none (`_study_value`)."""
    given = ctx.default_map or {}
    return [
        p.name
        for p in ctx.command.params
        if p.param_type_name == "argument" and p.nargs == -1 and p.name in given
    ]


def _study_value(callback: Callable[..., Any] | None) -> Callable[..., Any]:
    """A variadic argument's callback that takes the study file's value where the command line
    gave none, then runs the argument's own `callback`."""

    def take(ctx: typer.Context, param: Any, value: Any) -> Any:
        value = value or ctx.default_map[param.name]
        return value if callback is None else callback(ctx, param, value)

    return take


def study_defaults(study: Mapping[str, Any], source: str, ctx: typer.Context) -> dict[str, Any]:
    """The defaults that the study file `source` (parsed: `study`) gives the command of `ctx`,
    by parameter name: its top-level keys that the command has (a key no command has is an
    error), then its section (`[score]`, `[lab.build]`) over them.

    Raises:
        DivscopeError: a section that names no command, or a key that names no option of its
            section's command (naming the nearest option).
    """
    path = tuple(command_path(ctx))
    sections: dict[tuple[str, ...], Mapping[str, Any]] = {}
    shared = {k: v for k, v in study.items() if not isinstance(v, dict)}
    if path:
        root = ctx.find_root()
        _sections(study, root.command, root, (), source, sections)
    own = option_keys(ctx.command)
    found: dict[str, Any] = {}
    for key, value in shared.items():
        param = own.get(_normal(key))
        if param is None:
            everyone = _every_key(ctx.find_root()) if path else own
            if _normal(key) not in everyone:
                raise _unknown(source, "the top level (keys every command shares)", key, everyone)
            continue  # another command's option
        found[param.name] = _preset(param, value)
    for key, value in sections.get(path, {}).items():
        param = own.get(_normal(key))
        if param is None:
            raise _unknown(source, f"section [{'.'.join(path)}]", key, own)
        found[param.name] = _preset(param, value)
    return found


def option_keys(command: Any) -> dict[str, Any]:
    """A command's parameters by their keys in a study file: each long option name without
    `--`, each argument's name, `_` read as `-` (`--config` is none)."""
    keys: dict[str, Any] = {}
    for param in command.params:
        if param.name == STUDY:
            continue
        if param.param_type_name == "argument":
            keys[_normal(param.name or "")] = param
        for name in param.opts:
            if name.startswith("--"):
                keys[_normal(name[2:])] = param
    return keys


def _sections(
    table: Mapping[str, Any],
    group: Any,
    ctx: typer.Context,
    path: tuple[str, ...],
    source: str,
    found: dict[tuple[str, ...], Mapping[str, Any]],
) -> None:
    """The command sections of `table` (a group's: the app's, `[lab]`), by command path."""
    names = group.list_commands(ctx)
    for key, value in table.items():
        if not isinstance(value, dict):
            if path:  # the top level's keys are shared; a group's table holds sections only
                raise _unknown(source, f"section [{'.'.join(path)}]", key, {})
            continue
        name = _normal(key)
        if name not in names:
            where = f"section [{'.'.join((*path, key))}]"
            nearest = _nearest(name, names)
            raise DivscopeError(
                f"{source}: {where} names no divscope command (the nearest: {nearest}); a "
                "section is a command's name, e.g. [score] or [lab.build]."
            )
        inner = (
            group.get_command(ctx, name)
            if any(isinstance(v, dict) for v in value.values())
            else None
        )
        if hasattr(inner, "list_commands"):  # a group
            child = typer.Context(inner, info_name=name, parent=ctx)
            _sections(value, inner, child, (*path, name), source, found)
        else:
            found[(*path, name)] = value


def _every_key(ctx: typer.Context) -> set[str]:
    """The keys of every command under the group of `ctx` (building each)."""
    group = ctx.command
    if not hasattr(group, "list_commands"):
        return set(option_keys(group))
    keys: set[str] = set()
    for name in group.list_commands(ctx):
        inner = group.get_command(ctx, name)
        if inner is not None:
            keys |= _every_key(typer.Context(inner, info_name=name, parent=ctx))
    return keys


def _preset(param: Any, value: Any) -> Any:
    """A study file's value as the option takes it: a repeated option a list (one text alone
    too), a text option (`--budgets 0,1,2`) its text (a list joined by commas)."""
    if param.multiple or param.nargs == -1:
        return value if isinstance(value, list) else [value]
    if isinstance(value, list):  # a scalar option's list: the text of a parsed option
        return ",".join(map(str, value))
    return value


def _unknown(source: str, where: str, key: str, valid: Iterable[str]) -> DivscopeError:
    nearest = _nearest(_normal(key), list(valid))
    return DivscopeError(
        f"{source}: {where} has no option {key!r} (the nearest: {nearest}); a key is an "
        "option's name without -- (top-p or top_p) or an argument's name, as the command's "
        "--help shows it."
    )


def _nearest(name: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.0)
    return repr(close[0]) if close else "none"


def _normal(key: str) -> str:
    return key.replace("_", "-")


def leaves(function: Callable[..., Any]) -> list[Option]:
    """The options of `function`: its plain parameters and its groups' fields, in order."""
    hints = typing.get_type_hints(function, include_extras=True)
    docs = arguments_doc(function)
    found: list[Option] = []
    for name, parameter in inspect.signature(function).parameters.items():
        kind, flag = _split(hints.get(name, Any))
        if not flag.cli:
            if parameter.default is inspect.Parameter.empty:
                raise TypeError(f"{function.__qualname__}: {name} has no option and no default")
            continue
        kind = _group(kind)
        if dataclasses.is_dataclass(kind):
            default = parameter.default
            instance = None if default in (inspect.Parameter.empty, None) else default
            found += _fields(kind, (name,), instance, flag.omit, docs.get(name))
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and not flag.names:
            flag = Flag(argument=True, metavar=flag.metavar, parse=flag.parse)
        found.append(Option((name,), kind, flag, parameter.default, docs.get(name, "")))
    return found


def _fields(
    group: type,
    path: tuple[str, ...],
    instance: Any,
    omit: tuple[str, ...] = (),
    described: str | None = None,
) -> list[Option]:
    """The options of the fields of `group`; `described`: the command's `Args:` entry of the
    parameter that holds it, the help of its `Flag(described=True)` field."""
    hints = typing.get_type_hints(group, include_extras=True)
    docs = fields_doc(group)
    found: list[Option] = []
    for field in dataclasses.fields(group):
        kind, flag = _split(hints[field.name])
        if not flag.cli or not field.init or field.name in omit:
            continue
        if instance is not None:
            default = getattr(instance, field.name)
        elif field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = inspect.Parameter.empty
        if dataclasses.is_dataclass(kind):
            nested = None if default is inspect.Parameter.empty else default
            found += _fields(kind, (*path, field.name), nested, omit)
        else:
            text = described if flag.described and described else docs.get(field.name, "")
            found.append(Option((*path, field.name), kind, flag, default, text))
    return found


def _assemble(
    function: Callable[..., Any], signature: inspect.Signature, values: Mapping[tuple, Any]
) -> dict[str, Any]:
    """The keyword arguments of `function`: each group rebuilt from its fields' values."""
    hints = typing.get_type_hints(function, include_extras=True)
    arguments: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        kind, flag = _split(hints.get(name, Any))
        if not flag.cli:
            continue
        kind = _group(kind)
        if dataclasses.is_dataclass(kind):
            default = parameter.default
            base = None if default in (inspect.Parameter.empty, None) else default
            arguments[name] = _build(kind, (name,), base, values)
        else:
            arguments[name] = values[(name,)]
    return arguments


def _build(group: type, path: tuple[str, ...], base: Any, values: Mapping[tuple, Any]) -> Any:
    hints = typing.get_type_hints(group, include_extras=True)
    given: dict[str, Any] = {}
    for field in dataclasses.fields(group):
        kind, flag = _split(hints[field.name])
        if not flag.cli or not field.init:
            continue
        if dataclasses.is_dataclass(kind):
            nested = getattr(base, field.name) if base is not None else None
            given[field.name] = _build(kind, (*path, field.name), nested, values)
        elif (*path, field.name) in values:  # not an omitted field
            given[field.name] = values[(*path, field.name)]
    return dataclasses.replace(base, **given) if base is not None else group(**given)


def _split(hint: Any) -> tuple[Any, Flag]:
    """(type, Flag) of an annotation; `Flag()` when it has none."""
    if typing.get_origin(hint) is Annotated:
        kind, *extras = typing.get_args(hint)
        flags = [e for e in extras if isinstance(e, Flag)]
        return kind, flags[0] if flags else Flag()
    return hint, Flag()


def _optional(kind: Any) -> Any:
    """`X` for `X | None`; else `kind` itself."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        kinds = [k for k in typing.get_args(kind) if k is not type(None)]
        if len(kinds) == 1:
            return kinds[0]
    return kind


def _group(kind: Any) -> Any:
    """The group of a group parameter that Python may leave out (`out: PartedOutput | None =
    None`: the library returns the table instead): its fields are options as the group's, the
    required ones required, so the command line always passes one; any other type as it is.

    >>> from divscope.params import Output
    >>> _group(Output | None).__name__, _group(int | None)
    ('Output', int | None)
    """
    group = _optional(kind)
    return group if dataclasses.is_dataclass(group) else kind


def _origin(kind: Any) -> Any:
    """`tuple` for `tuple[X, ...]` and `tuple[X, ...] | None`; else the type's origin."""
    return typing.get_origin(_optional(kind))


def _items(kind: Any) -> Any:
    """`X` of `tuple[X, ...]` or `tuple[X, ...] | None`."""
    return typing.get_args(_optional(kind))[0]


def _path_like(kind: Any) -> Any:
    """`Path` (or `Path | None`) for a union that takes `os.PathLike`; else `kind` itself."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        kinds = typing.get_args(kind)
        if any(typing.get_origin(k) is os.PathLike or k is os.PathLike for k in kinds):
            return Path | None if type(None) in kinds else Path
    return kind


def _plain(value: Any) -> Any:
    """A value as JSON and TOML write it: a path's text, a list for a sequence."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def _text(value: Any) -> str:
    """A default as the command line writes it: a sequence joined by commas."""
    if isinstance(value, tuple | list):
        return ",".join(map(str, value))
    return str(value)


def summary(function: Callable[..., Any]) -> str:
    """`function`'s docstring up to its first section (`Args:`, `Returns:`, `Example`...)."""
    lines = (inspect.getdoc(function) or "").splitlines()
    kept: list[str] = []
    for line in lines:
        if SECTION.match(line) or line.startswith(">>>"):
            break
        kept.append(line)
    return "\n".join(kept).strip()


def arguments_doc(function: Callable[..., Any]) -> dict[str, str]:
    """name -> text of each entry of `function`'s `Args:` section, joined to one line."""
    lines = (inspect.getdoc(function) or "").splitlines()
    docs: dict[str, str] = {}
    inside, current = False, None
    for line in lines:
        if re.match(r"^(Args|Arguments):\s*$", line):
            inside = True
            continue
        if not inside:
            continue
        if line and not line.startswith(" "):
            break  # the next section
        entry = re.match(r"^    (\*{0,2}\w+)(?: \(.*?\))?: ?(.*)$", line)
        if entry:
            current = entry.group(1).lstrip("*")
            docs[current] = entry.group(2).strip()
        elif current is not None and line.strip():
            docs[current] += " " + line.strip()
    return docs


@cache
def fields_doc(group: type) -> dict[str, str]:
    """name -> the docstring that follows each field of the dataclass `group`, on one line."""
    docs: dict[str, str] = {}
    for klass in reversed(group.__mro__):
        if not dataclasses.is_dataclass(klass) or klass is object:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


__all__ = [
    "Command",
    "Option",
    "arguments_doc",
    "command",
    "command_path",
    "fields_doc",
    "leaves",
    "option_keys",
    "study_defaults",
    "summary",
]
