"""Study files on the command line: `--config STUDY.toml` on every command (the file's values as
defaults, its command's section over its shared keys, the command line over both, unknown keys
refused), and `divscope config OUT`, which writes the study file that replays the run that made
OUT."""

from __future__ import annotations

import inspect
import json
import tomllib
from pathlib import Path
from typing import Annotated

import pyarrow.parquet as pq
import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from divscope.cli import COMMANDS, app
from divscope.cli import lab as lab_cli
from divscope.cli.command import command, leaves
from divscope.io import read_table
from divscope.output import INVOCATION_KEY, MANIFEST
from divscope.params import Flag, Output, PartedOutput
from divscope.study_file import study_text

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "fixtures" / "lab"
EVERY = [*COMMANDS, *(f"lab {name}" for name in lab_cli.COMMANDS)]


def fit(
    data: str,
    out: Output,
    *,
    seed: int = 0,
    top_p: float = 0.7,
    tags: tuple[str, ...] = (),
    sizes: Annotated[tuple[int, ...], Flag(parse=lambda t: tuple(map(int, t.split(","))))] = (1,),
) -> dict:
    """Fit a toy model.

    Args:
        data: the input.
        out: where it goes.
        seed: a seed.
        top_p: a top-p.
        tags: a tag (repeat).
        sizes: sizes, comma-separated.

    Returns:
        What it was called with.
    """
    return {"data": data, "out": str(out.path), "seed": seed, "top_p": top_p, "tags": list(tags),
            "sizes": list(sizes), "overwrite": out.overwrite}  # fmt: skip


def other(data: str, *, depth: int = 1) -> None:
    """Another toy command, whose --depth is a shared key of the study files below.

    Args:
        data: the input.
        depth: a depth.

    Returns:
        Nothing.
    """


TOY = typer.Typer()
TOY.command("fit")(command(fit, lambda result, arguments: typer.echo(json.dumps(result))))
TOY.command("other")(command(other))


def _toy(tmp_path: Path, study: str, *args: str) -> dict:
    path = tmp_path / "study.toml"
    path.write_text(study)
    result = CliRunner().invoke(TOY, ["fit", "--config", str(path), *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _refusal(tmp_path: Path, study: str, *args: str) -> str:
    """The one-line error of `divscope ARGS --config study.toml`, with the file's contents."""
    path = tmp_path / "bad.toml"
    path.write_text(study)
    result = CliRunner().invoke(app, [*args, "--config", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def test_the_command_line_wins_over_the_section_which_wins_over_the_top_level(tmp_path):
    study = 'seed = 1\ntop_p = 0.5\ndepth = 4\n[fit]\ndata = "d.jsonl"\nout = "o"\nseed = 2\n'
    assert _toy(tmp_path, study) == {"data": "d.jsonl", "out": "o", "seed": 2, "top_p": 0.5,
                                     "tags": [], "sizes": [1], "overwrite": False}  # fmt: skip
    given = _toy(tmp_path, study, "x.jsonl", "--seed", "3", "--out", "p", "--overwrite")
    assert (given["data"], given["seed"], given["out"], given["overwrite"]) == (
        "x.jsonl",
        3,
        "p",
        True,
    )


def test_lists_and_text_options_take_toml_values(tmp_path):
    """A repeated option takes a list (or one text), a parsed option a list or its text; `-`
    and `_` are one in keys."""
    study = '[fit]\ndata = "d"\nout = "o"\ntags = ["a", "b"]\nsizes = [4, 8]\ntop-p = 1\n'
    given = _toy(tmp_path, study)
    assert (given["tags"], given["sizes"], given["top_p"]) == (["a", "b"], [4, 8], 1.0)
    given = _toy(tmp_path, '[fit]\ndata = "d"\nout = "o"\ntags = "a"\nsizes = "4,8"\n')
    assert (given["tags"], given["sizes"]) == (["a"], [4, 8])


@pytest.mark.parametrize(
    "study,args,expected",
    [
        ("[score]\ntop-q = 0.5\n", ["score"], ["section [score] has no option 'top-q'",
                                               "the nearest: 'top-p'"]),
        ("bsae = 'b'\n", ["score"], ["the top level", "no option 'bsae'", "the nearest: 'base'"]),
        ("[scroe]\ntop-p = 0.5\n", ["score"], ["section [scroe] names no divscope command",
                                               "the nearest: 'score'"]),
        ("[lab.build]\nsed = 1\n", ["lab", "build"], ["section [lab.build] has no option 'sed'",
                                                      "the nearest: 'seed'"]),
        ("[score\n", ["score"], ["not a TOML study file", "line 1"]),
    ],
)  # fmt: skip
def test_an_unknown_key_or_section_names_the_file_the_section_and_the_nearest(
    tmp_path, study, args, expected
):
    message = _refusal(tmp_path, study, *args)
    assert f"{tmp_path / 'bad.toml'}:" in message
    for part in expected:
        assert part in message


def test_a_shared_key_another_command_has_is_left_to_it(tmp_path):
    """`depth` is `other`'s: `fit` reads the same file without it."""
    assert _toy(tmp_path, 'depth = 5\n[fit]\ndata = "d"\nout = "o"\n')["seed"] == 0


def test_a_missing_study_file_is_named():
    result = CliRunner().invoke(app, ["score", "--config", "no/such.toml"])
    assert result.exit_code == 2 and "no/such.toml: no such study file" in result.output


@pytest.mark.parametrize("name", EVERY)
def _parsed(name: str, args: list[str]) -> typer.Context:
    """The context of `divscope NAME ARGS` parsed (not run)."""
    target, context = get_command(app), None
    context = typer.Context(target, info_name="divscope")
    *groups, last = name.split()
    for word in groups:
        target = target.get_command(context, word)
        context = typer.Context(target, info_name=word, parent=context)
    return target.get_command(context, last).make_context(last, args, parent=context)


@pytest.mark.parametrize("name", EVERY)
def test_every_command_takes_a_study_file(name, tmp_path):
    """`--config` on every command, read first: a study file that gives each of the command's
    required options (in its section) is all the command line needs."""
    target = COMMANDS.get(name) or lab_cli.COMMANDS[name.removeprefix("lab ")]
    required = [o for o in leaves(target.function()) if o.default is inspect.Parameter.empty]
    section = "".join(f'{o.key} = "x"\n' for o in required)
    (tmp_path / "study.toml").write_text(f"[{name.replace(' ', '.')}]\n{section}")
    parsed = _parsed(name, ["--config", str(tmp_path / "study.toml")])
    for option in required:
        value = parsed.params[option.name]
        assert [str(v) for v in value] == ["x"] if isinstance(value, list) else str(value) == "x"


def test_the_sample_study_file_is_valid_for_each_of_its_commands():
    """docs/study.toml parses for each of its sections' commands, every key setting its option."""
    path = ROOT / "docs" / "study.toml"
    study = tomllib.loads(path.read_text())
    sections = {k: v for k, v in study.items() if isinstance(v, dict) and k != "lab"}
    sections["lab build"] = study["lab"]["build"]
    assert set(sections) == {"score", "analyze", "cross-sample", "lab build"}
    for name, section in sections.items():
        parsed = _parsed(name, ["--config", str(path)])
        target = COMMANDS.get(name) or lab_cli.COMMANDS["build"]
        keys = {o.key: o.name for o in leaves(target.function())}
        for key in section:
            assert parsed.params[keys[key]] is not None, (name, key)
        if name == "cross-sample":
            assert parsed.params["policy"] == "base,rl,forward,reverse"
            assert parsed.params["budgets"] == "0,1,2,4,8,16,32"
    assert parsed.params["seed"] == 0  # a shared key


@pytest.mark.parametrize("name", EVERY)
def test_every_default_recorded_replays_as_itself(name, tmp_path):
    """Each option's default, as an invocation records it and `divscope config` writes it,
    read back through `--config`: the library gets the same value as from the default."""
    target = COMMANDS.get(name) or lab_cli.COMMANDS[name.removeprefix("lab ")]
    options = leaves(target.function())
    required = {o.key: "x" for o in options if o.default is inspect.Parameter.empty}
    recorded = {o.key: o.recorded(None) for o in options if o.key not in required}
    assert json.loads(json.dumps(recorded)) == recorded  # JSON's own types
    section = name.replace(" ", ".")
    (tmp_path / "given.toml").write_text(
        f"[{section}]\n" + "".join(f'{k} = "x"\n' for k in required)
    )
    invocation = {"command": name, "options": {**required, **recorded}}
    (tmp_path / "recorded.toml").write_text(study_text(invocation))
    given = _parsed(name, ["--config", str(tmp_path / "given.toml")]).params
    replayed = _parsed(name, ["--config", str(tmp_path / "recorded.toml")]).params
    for option in options:
        assert option.value(replayed[option.name]) == option.value(given[option.name]), option.key


def test_each_parsed_default_replays_as_its_text():
    """An option whose text is parsed records its default as text (`Option.recorded`), which
    must parse back to the default."""
    for name in EVERY:
        target = COMMANDS.get(name) or lab_cli.COMMANDS[name.removeprefix("lab ")]
        for option in leaves(target.function()):
            if option.flag.parse is None or option.default in (None, inspect.Parameter.empty):
                continue
            text = option.recorded(None)
            assert option.flag.parse(text) == option.default, (name, option.key, text)


def test_run_options_are_not_recorded():
    """--overwrite, --resume and --shard are about the run, not its result."""
    keys = {o.key for o in leaves(fit) if o.flag.replay}
    assert "overwrite" not in keys and "out" in keys
    run_only = {f.key for f in leaves(_parted) if not f.flag.replay}
    assert run_only == {"overwrite", "resume", "shard"}


def _parted(out: PartedOutput) -> None:
    """A toy entry point with a parted output.

    Args:
        out: where.

    Returns:
        Nothing.
    """


def _score(trajectories: Path, out: Path, *args: str) -> None:
    result = CliRunner().invoke(app, ["score", str(trajectories), "--base", str(LAB / "base"),
                                      "--rl", str(LAB / "rl"), "-o", str(out), *args])  # fmt: skip
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def few(tmp_path_factory) -> Path:
    """The lab's first 4 trajectories."""
    path = tmp_path_factory.mktemp("few") / "few.jsonl"
    lines = (LAB / "trajectories.jsonl").read_text().splitlines(keepends=True)[:4]
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize("suffix", [".parquet", ""])
def test_a_replayed_score_writes_the_same_table(tmp_path, few, suffix):
    """score (a file, or a directory of parts), `divscope config` of it, then the replay into
    another output: the same table, the same metadata but the time, the same invocation but
    --out."""
    first, again = tmp_path / f"first{suffix}", tmp_path / f"again{suffix}"
    _score(few, first, "--top-p", "0.8", "--window", "64", "--overwrite")
    study = tmp_path / "study.toml"
    result = CliRunner().invoke(app, ["config", str(first), "-o", str(study)])
    assert result.exit_code == 0 and result.output == f"wrote {study}\n", result.output
    text = study.read_text()
    assert text.startswith("[score]\n") and "top-p = 0.8" in text and "overwrite" not in text
    result = CliRunner().invoke(app, ["score", "--config", str(study), "-o", str(again)])
    assert result.exit_code == 0, result.output
    assert read_table(first).equals(read_table(again))
    files = [first if suffix else first / "part-000000.parquet",
             again if suffix else again / "part-000000.parquet"]  # fmt: skip
    metadata = [pq.read_schema(f).metadata for f in files]
    divscope = [json.loads(m[b"divscope"]) for m in metadata]
    for one in divscope:
        one.pop("created_at")
    assert divscope[0] == divscope[1]
    recorded = [json.loads(m[INVOCATION_KEY]) for m in metadata]
    assert recorded[0]["options"].pop("out") == str(first)
    assert recorded[1]["options"].pop("out") == str(again)
    assert recorded[0] == recorded[1]
    assert recorded[0]["options"]["top-p"] == 0.8 and recorded[0]["options"]["window"] == 64
    if not suffix:  # the manifest of the parts records it too
        manifest = json.loads((again / MANIFEST).read_text())
        assert manifest["invocation"]["options"]["out"] == str(again)


def test_config_prints_the_study_file_of_an_analysis(tmp_path, lab_head_tokens_path):
    summary = tmp_path / "summary.json"
    args = ["analyze", str(lab_head_tokens_path), "-o", str(summary), "--n-boot", "20"]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert json.loads(summary.read_text())["invocation"]["command"] == "analyze"
    result = CliRunner().invoke(app, ["config", str(summary)])
    assert result.exit_code == 0, result.output
    study = tomllib.loads(result.output)["analyze"]
    assert (study["tokens"], study["out"], study["n-boot"]) == (
        str(lab_head_tokens_path),
        str(summary),
        20,
    )


def test_config_of_an_output_without_an_invocation_says_so(tmp_path, lab_head_tokens_path):
    """The session's token table was scored from Python: nothing to replay."""
    result = CliRunner().invoke(app, ["config", str(lab_head_tokens_path)])
    assert result.exit_code == 2 and "records no invocation" in result.output


def test_a_graded_table_records_its_invocation(tmp_path, few):
    """`grade` writes with polars: the invocation is in the file's key-value metadata."""
    graded = tmp_path / "graded.parquet"
    args = ["grade", str(few), "--grader", "lab", "-o", str(graded)]
    assert CliRunner().invoke(app, args).exit_code == 0
    result = CliRunner().invoke(app, ["config", str(graded)])
    assert result.exit_code == 0, result.output
    study = tomllib.loads(result.output)["grade"]
    assert (study["responses"], study["grader"], study["out"]) == (str(few), "lab", str(graded))
