"""Chat prompts on the lab: `generate`, `cross-sample` and `calibrate` read a `messages` file,
template it once (`prompts.template_messages`) with `--system-prompt`, and record both.

The lab's tokenizer has no chat template (its models were trained on raw questions), so the
tests copy the lab with a plain one: the turns' text, a system turn's followed by a newline.
One user turn then templates to the question itself, and the lab tokenizer adds no special
tokens, so a `messages` file must decode exactly as the raw questions do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from divscope import calibrate, cross_sample, generate
from divscope.cli import app
from divscope.decoding import DecodeConfig
from divscope.decoding.calibrate import Target
from divscope.decoding.cross_sample import Grid
from divscope.generation import GenerateConfig, Sampling
from divscope.io import read_table
from divscope.models.tokenizers import load_tokenizer
from divscope.params import Chat, ModelPair, PartedOutput

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] + '\n' }}"
    "{% else %}{{ m['content'] }}{% endif %}{% endfor %}"
)
SYSTEM = "Solve the chain."
runner = CliRunner()


@pytest.fixture(scope="module")
def chat_lab(tmp_path_factory) -> Path:
    """The lab's base and RL models, their tokenizers given the plain chat template."""
    root = tmp_path_factory.mktemp("chat_lab")
    for name in ("base", "rl"):
        shutil.copytree(LAB / name, root / name)
        config = root / name / "tokenizer_config.json"
        config.write_text(json.dumps(json.loads(config.read_text()) | {"chat_template": TEMPLATE}))
    return root


@pytest.fixture
def prompt_files(tmp_path) -> dict[str, Path]:
    """The first 3 eval prompts as raw questions (`prompt`) and as one user turn each."""
    questions = pl.read_ndjson(LAB / "prompts" / "eval.jsonl").head(3)
    chats = questions.select(
        "prompt_id",
        pl.concat_list(pl.struct(role=pl.lit("user"), content="prompt")).alias("messages"),
        "answer",
    )
    files = {"text": tmp_path / "questions.jsonl", "messages": tmp_path / "chats.jsonl"}
    questions.write_ndjson(files["text"])
    chats.write_ndjson(files["messages"])
    return files


def _settings(path: Path) -> dict:
    return json.loads(pq.read_schema(path).metadata[b"divscope"])


def _generate(prompts, model, out, chat=Chat()):  # noqa: B008 (frozen)
    config = GenerateConfig(Sampling(n=2, max_new_tokens=24, seed=3), chat=chat)
    generate(prompts, str(model), PartedOutput(out), config, progress=False)
    return read_table(out).sort("prompt_id", "sample_id")


def test_generate_reads_messages_as_the_questions_with_the_chat_template(
    tmp_path, chat_lab, prompt_files
):
    """A `messages` file, and raw questions with --chat-template, give the raw questions' token
    ids and responses; the manifest records the template."""
    plain = _generate(prompt_files["text"], LAB / "base", tmp_path / "plain.parquet")
    chats = _generate(prompt_files["messages"], chat_lab / "base", tmp_path / "chats.parquet")
    flag = _generate(
        prompt_files["text"], chat_lab / "base", tmp_path / "flag.parquet", Chat(chat_template=True)
    )
    columns = ["prompt_id", "sample_id", "prompt", "prompt_ids", "response_ids", "answer"]
    assert chats.select(columns).equals(plain.select(columns))
    assert flag.select(columns).equals(plain.select(columns))
    assert chats["messages"][0].to_list() == [{"role": "user", "content": plain["prompt"][0]}]
    assert _settings(tmp_path / "plain.parquet")["chat_template"] is False
    for name in ("chats", "flag"):
        settings = _settings(tmp_path / f"{name}.parquet")
        assert settings["chat_template"] is True and settings["system_prompt"] is None


def test_system_prompt_from_the_command_line_and_resume_refuses_another(
    tmp_path, chat_lab, prompt_files
):
    tokenizer = load_tokenizer(str(chat_lab / "base"))
    out = tmp_path / "runs"
    args = ["generate", str(prompt_files["messages"]), "--model", str(chat_lab / "base"),
            "--n", "1", "--max-new-tokens", "8", "--out", str(out)]  # fmt: skip
    result = runner.invoke(app, [*args, "--system-prompt", SYSTEM])
    assert result.exit_code == 0, result.output
    table = read_table(out).sort("prompt_id")
    question = pl.read_ndjson(prompt_files["text"])["prompt"][0]
    assert table["prompt"][0] == f"{SYSTEM}\n{question}"  # first, once
    assert table["prompt_ids"][0].to_list() == tokenizer(f"{SYSTEM}\n{question}")["input_ids"]
    assert _settings(next(out.glob("part-*.parquet")))["system_prompt"] == SYSTEM
    again = runner.invoke(app, [*args, "--system-prompt", "Think twice.", "--resume"])
    assert again.exit_code != 0 and "other settings" in again.output
    same = runner.invoke(app, [*args, "--system-prompt", SYSTEM, "--resume"])
    assert same.exit_code == 0, same.output
    plain = runner.invoke(app, [*args[:1], str(prompt_files["text"]), *args[2:-1],
                                str(tmp_path / "plain"), "--system-prompt", SYSTEM])  # fmt: skip
    assert plain.exit_code != 0
    assert "--system-prompt needs chat prompts: pass --chat-template" in plain.output


def test_cross_sample_and_calibrate_read_messages_as_the_questions(
    tmp_path, chat_lab, prompt_files
):
    """cross-sample on a `messages` file decodes exactly as on the raw questions and records
    the template; calibrate samples the same prompts and says so in its source."""
    runs = {}
    for name, models, prompts in (
        ("plain", LAB, prompt_files["text"]),
        ("chats", chat_lab, prompt_files["messages"]),
    ):
        runs[name] = pl.from_arrow(
            cross_sample(
                prompts,
                ModelPair(str(models / "base"), str(models / "rl")),
                "base,rl,forward:eps=0.05",
                tmp_path / f"{name}.parquet",
                DecodeConfig(max_new_tokens=24),
                Grid(budgets=(2,), n=2, grader="lab"),
                progress=False,
            )  # fmt: skip
        )
    columns = ["prompt_id", "sample_id", "policy", "response_ids", "switch_positions", "correct"]
    assert runs["chats"].select(columns).equals(runs["plain"].select(columns))
    assert _settings(tmp_path / "chats.parquet")["chat_template"] is True
    assert _settings(tmp_path / "plain.parquet")["chat_template"] is False
    calibration = calibrate(
        prompt_files["messages"], tmp_path / "gates.json", Target(rate=0.1, n=1),
        ModelPair(str(chat_lab / "base"), str(chat_lab / "rl")),
        DecodeConfig(max_new_tokens=16, chat=Chat(system_prompt=SYSTEM)), progress=False,
    )  # fmt: skip
    assert calibration.source.endswith(f"; chat template, system prompt {SYSTEM!r})")
