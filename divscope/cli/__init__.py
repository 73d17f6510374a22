"""The `divscope` command line: a typer app generated from the library's entry points.

Each command is a `divscope.cli.command.Command`: the entry point's import path, how its
outcome is printed and an example command line (`divscope/cli/<command>.py`). Its options are
generated from the entry point's signature, and only when the command runs or shows its help, so
that `divscope --help` imports no torch. The help is plain text (no rich markup: `[...]` is
text) and ends with the example. A `DivscopeError` raised by the library becomes a one-line
message and exit status 2, never a traceback.
"""

from __future__ import annotations

import os
import sys
import warnings

import typer
from typer.core import TyperGroup

from divscope import __version__
from divscope.cli.command import Command
from divscope.errors import DivscopeError, DivscopeWarning


class _Lazy(TyperGroup):
    """A group whose generated commands (`generated`) are built on first use."""

    def generated(self) -> dict[str, Command]:
        """The generated commands, by name, in the order of the help."""
        raise NotImplementedError

    def list_commands(self, ctx) -> list[str]:
        return [*self.generated(), *super().list_commands(ctx)]

    def get_command(self, ctx, name: str):
        if name not in self.generated():
            return super().get_command(ctx, name)
        return _built(name, self.generated()[name])

    def format_commands(self, ctx, formatter) -> None:
        """The command list, with each generated command's summary read without importing it."""
        rows = [(name, command.summary()) for name, command in self.generated().items()]
        for name in super().list_commands(ctx):
            rows.append((name, super().get_command(ctx, name).get_short_help_str(80)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


class _LabGroup(_Lazy):
    """`divscope lab`: the commands of `divscope.cli.lab.COMMANDS`."""

    def generated(self) -> dict[str, Command]:
        return _lab.COMMANDS


class _Group(_Lazy):
    """The app's group: the commands of `COMMANDS` built on first use, errors as one line."""

    def generated(self) -> dict[str, Command]:
        return COMMANDS

    def invoke(self, ctx):
        if os.getcwd() not in sys.path:  # so that --grader mymodule:check finds ./mymodule.py
            sys.path.insert(0, os.getcwd())
        with warnings.catch_warnings():
            warnings.simplefilter("default", DivscopeWarning)
            show = warnings.showwarning
            warnings.showwarning = _show_warning(show)
            try:
                return super().invoke(ctx)
            except DivscopeError as error:
                typer.echo(f"Error: {error}", err=True)
                raise typer.Exit(2) from error
            finally:
                warnings.showwarning = show


def _show_warning(fallback):
    """divscope's own warnings as one `Warning: ...` line each (no file and line number)."""

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DivscopeWarning):
            typer.echo(f"Warning: {message}", err=True)
        else:
            fallback(message, category, filename, lineno, file, line)

    return show


app = typer.Typer(
    cls=_Group,
    name="divscope",
    help="Where, token by token, does an RL-fine-tuned model differ from its base, and which "
    "differences carry the accuracy gain?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # plain text: `'divscope[big]'` and `[rows, V]` are no rich markup
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"divscope {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """divscope: token-level divergence between a base model and its RL twin."""


def _built(name: str, command: Command):
    """The click command `name` of `command`, its options read from the entry point and its
    help ending with its example; its help is plain text, as the app's."""
    single = typer.Typer(
        pretty_exceptions_enable=False,
        add_completion=False,
        rich_markup_mode=app.rich_markup_mode,
    )
    single.command(name, epilog=command.epilog())(command.callback())
    return typer.main.get_command(single)


# Commands: one module each.
from divscope.cli import analyze as _analyze  # noqa: E402
from divscope.cli import calibrate as _calibrate  # noqa: E402
from divscope.cli import config as _config  # noqa: E402
from divscope.cli import cross_sample as _cross_sample  # noqa: E402
from divscope.cli import generate as _generate  # noqa: E402
from divscope.cli import grade as _grade  # noqa: E402
from divscope.cli import lab as _lab  # noqa: E402
from divscope.cli import plot as _plot  # noqa: E402
from divscope.cli import quickstart as _quickstart  # noqa: E402
from divscope.cli import report as _report  # noqa: E402
from divscope.cli import score as _score  # noqa: E402
from divscope.cli import watch as _watch  # noqa: E402
from divscope.cli import weights as _weights  # noqa: E402

COMMANDS = {
    "score": _score.COMMAND,
    "analyze": _analyze.COMMAND,
    "plot": _plot.COMMAND,
    "report": _report.COMMAND,
    "generate": _generate.COMMAND,
    "grade": _grade.COMMAND,
    "cross-sample": _cross_sample.COMMAND,
    "calibrate": _calibrate.COMMAND,
    "weights": _weights.COMMAND,
    "quickstart": _quickstart.COMMAND,
    "watch": _watch.COMMAND,
    "config": _config.COMMAND,
}
"""The generated commands, in the order of the help."""

app.add_typer(_lab.app, name="lab", cls=_LabGroup)
