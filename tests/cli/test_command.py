"""The command-line generator (`divscope.cli.command`): options from signatures and dataclass
fields, with their defaults, help and CLI facts in one place each; and the app built from it."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from divscope.cli import COMMANDS, app
from divscope.cli import lab as lab_cli
from divscope.cli.command import command, leaves
from divscope.params import LIBRARY_ONLY, Flag, Output

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Inner:
    """A group nested in another."""

    depth: Annotated[int, Flag(min=1)] = 2
    """How deep to go."""
    tags: tuple[str, ...] = ()
    """A tag (repeat for several)."""


@dataclass(frozen=True)
class Outer:
    """A group holding a group."""

    inner: Inner = Inner()
    """The nested group."""
    sizes: Annotated[tuple[int, ...], Flag(parse=lambda text: tuple(map(int, text.split(","))))] = (
        1,
        2,
    )
    """Sizes, comma-separated."""
    rate: float = 0.5
    """A rate."""


@dataclass(frozen=True)
class Seeded:
    """A group with a field named like another group's."""

    rate: float = 0.1
    """Another rate."""


def run(
    source: str,
    out: Output,
    outer: Outer = Outer(Inner(depth=3), rate=0.25),  # noqa: B008 (frozen)
    *,
    loud: bool = False,
    callback: Annotated[Any, LIBRARY_ONLY] = None,
) -> dict:
    """Run a toy command.

    More about it.

    Args:
        source: The input file.
        out: where the result goes.
        outer: the settings.
        loud: Say more.
        callback: never an option.

    Returns:
        What it was called with.
    """
    return {"source": source, "out": out, "outer": outer, "loud": loud, "callback": callback}


def invoke(function, args: list[str]) -> tuple[Any, list]:
    """Run `function` as a one-command app; the results it returned, in a list."""
    returned: list = []
    single = typer.Typer(add_completion=False, rich_markup_mode=None)
    single.command()(command(function, lambda result, arguments: returned.append(result)))
    return CliRunner().invoke(single, args), returned


def test_nested_groups_are_flattened_into_one_option_per_field():
    paths = [option.path for option in leaves(run)]
    assert paths == [
        ("source",),
        ("out", "path"),
        ("out", "overwrite"),
        ("outer", "inner", "depth"),
        ("outer", "inner", "tags"),
        ("outer", "sizes"),
        ("outer", "rate"),
        ("loud",),
    ]


def test_defaults_come_from_the_default_instance_and_groups_are_rebuilt():
    defaults = {option.name: option.default for option in leaves(run)}
    assert (defaults["depth"], defaults["rate"], defaults["sizes"]) == (3, 0.25, (1, 2))
    result, returned = invoke(run, ["in.txt", "--out", "x.json"])
    assert result.exit_code == 0, result.output
    assert returned == [
        {
            "source": "in.txt",
            "out": Output(Path("x.json")),
            "outer": Outer(Inner(depth=3), rate=0.25),
            "loud": False,
            "callback": None,
        }
    ]


def test_options_set_the_fields_they_stand_for():
    args = ["in.txt", "-o", "x.json", "--overwrite", "--depth", "5", "--rate", "0.75", "--loud"]
    result, returned = invoke(run, args)
    assert result.exit_code == 0, result.output
    called = returned[0]
    assert called["out"] == Output(Path("x.json"), overwrite=True)
    assert called["outer"] == Outer(Inner(depth=5), rate=0.75) and called["loud"]


def test_tuple_fields_are_repeatable_options():
    result, returned = invoke(run, ["in", "-o", "x", "--tags", "a", "--tags", "b"])
    assert result.exit_code == 0, result.output
    assert returned[0]["outer"].inner.tags == ("a", "b")


def test_a_flag_with_parse_takes_text_and_shows_its_default_joined():
    result, returned = invoke(run, ["in", "-o", "x", "--sizes", "4,5,6"])
    assert result.exit_code == 0, result.output
    assert returned[0]["outer"].sizes == (4, 5, 6)
    shown = invoke(run, ["--help"])[0].output
    assert "[default: (1,2)]" in " ".join(shown.split())  # click shows a text default so


def test_flag_facts_reach_the_option():
    result, _ = invoke(run, ["in", "-o", "x", "--depth", "0"])
    assert result.exit_code == 2 and "--depth" in result.output


def test_help_comes_from_field_docstrings_and_args_entries():
    helps = {option.name: option.help for option in leaves(run)}
    assert helps["depth"] == "How deep to go."  # the field's docstring
    assert helps["source"] == "The input file."  # the function's Args entry
    assert helps["loud"] == "Say more."
    # --out says what this command writes: the Args entry of the group's parameter
    assert helps["path"] == "where the result goes."

    def bare(out: Output) -> None:
        """No Args section."""

    assert leaves(bare)[0].help == "Where to write the result (its format follows the suffix)."
    shown = " ".join(invoke(run, ["--help"])[0].output.split())
    assert "Run a toy command. More about it." in shown and "Returns" not in shown


def test_library_only_parameters_have_no_option():
    assert "callback" not in {option.name for option in leaves(run)}
    assert "--callback" not in invoke(run, ["--help"])[0].output

    def needs(callback: Annotated[Any, LIBRARY_ONLY]) -> None:
        """Needs a callback."""

    with pytest.raises(TypeError, match="callback has no option and no default"):
        leaves(needs)


def test_two_options_with_one_name_are_refused():
    def twice(outer: Outer = Outer(), other: Seeded = Seeded()) -> None:  # noqa: B008
        """Two groups, one field name."""

    with pytest.raises(TypeError, match="options named twice: rate"):
        command(twice)


def _generated() -> dict[str, Any]:
    """Every generated command of the app, by its command line."""
    found = {name: c for name, c in COMMANDS.items()}
    found |= {f"lab {name}": c for name, c in lab_cli.COMMANDS.items()}
    return found


@pytest.mark.parametrize("name", sorted(_generated()))
def test_every_option_of_every_command_has_help(name):
    """Each option's help is a field docstring or an `Args:` entry: none is missing."""
    group = get_command(app)
    context = typer.Context(group)
    built = group
    for word in name.split():
        built = built.get_command(context, word)
        context = typer.Context(built, parent=context)
    undocumented = [p.name for p in built.params if p.name != "help" and not p.help]
    assert not undocumented, f"divscope {name}: options without help: {undocumented}"
    assert built.help == built.callback.__doc__


def test_the_app_help_imports_no_entry_point_and_no_torch():
    code = (
        "import sys\n"
        "from divscope.cli import app\n"
        "try:\n"
        "    app(['--help'], standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "for group in (['lab', '--help'],):\n"
        "    try:\n"
        "        app(group, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'divscope.scoring.score',\n"
        "    'divscope.generation.generate', 'divscope.lab.family') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "generate" in result.stdout and "build" in result.stdout
