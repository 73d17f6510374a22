"""`divscope.generate` on tiny real models (tests/conftest.py)."""

import json

import polars as pl
import pytest

from divscope import generate
from divscope.errors import DivscopeError
from divscope.generation import GenerateConfig, Sampling
from divscope.io import read_table, read_trajectories
from divscope.params import Chat, PartedOutput

EOS = 2  # conftest's tokenizer: <pad> <bos> <eos> <unk> w0 ...
PROMPTS = [
    {"prompt_id": "p0", "prompt": "w1 w2 w3", "answer": "w5"},
    {"prompt_id": "p1", "prompt": "w9", "answer": "w7", "level": 3},
    {"prompt_id": "p2", "prompt": "w4 w4", "answer": "w1"},
]


def _prompts(path, rows=PROMPTS):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _config(n=4, max_new_tokens=12, seed=0, **kwargs):
    sampling = Sampling(n=n, max_new_tokens=max_new_tokens, seed=seed, top_p=0.95)
    return GenerateConfig(sampling, **kwargs)


def _run(tmp_path, model, name, config, **kwargs):
    out = tmp_path / name
    prompts = _prompts(tmp_path / "prompts.jsonl")
    report = generate(prompts, str(model), PartedOutput(out, **kwargs), config, progress=False)
    return read_table(out).sort("prompt_id", "sample_id"), report


@pytest.fixture(scope="module")
def reference(tiny_pair, tmp_path_factory):
    """One run's trajectories (3 prompts × 4 samples, at most 12 tokens)."""
    frame, _ = _run(tmp_path_factory.mktemp("reference"), tiny_pair[0], "traj", _config())
    return frame


def test_n_samples_per_prompt_with_the_trajectory_schema(reference):
    assert reference.group_by("prompt_id").agg(pl.col("sample_id").sort()).sort(
        "prompt_id"
    ).rows() == [(p, [0, 1, 2, 3]) for p in ("p0", "p1", "p2")]
    assert reference.columns == [
        "prompt_id", "sample_id", "prompt", "prompt_ids", "response", "response_ids",
        "n_tokens", "finished", "model", "answer", "level",
    ]  # fmt: skip
    assert reference.filter(prompt_id="p0")["prompt_ids"][0].to_list() == [5, 6, 7]
    assert reference.filter(prompt_id="p1")["level"].to_list() == [3] * 4


def test_stops_at_eos_and_respects_max_new_tokens(reference):
    for row in reference.iter_rows(named=True):
        ids = row["response_ids"]
        assert row["n_tokens"] == len(ids) <= 12
        assert EOS not in ids[:-1]
        assert row["finished"] == (ids[-1] == EOS)
        assert row["finished"] or len(ids) == 12
    assert reference["finished"].any() and not reference["finished"].all()  # both cases seen


def test_reproducible_with_the_seed_and_independent_of_the_batch_size(
    tiny_pair, tmp_path, reference
):
    again, _ = _run(tmp_path, tiny_pair[0], "again", _config(batch_size=1))
    assert again.equals(reference)
    other, _ = _run(tmp_path, tiny_pair[0], "other", _config(seed=1))
    assert not other["response_ids"].equals(reference["response_ids"])


def test_the_reference_decoder_samples_the_same_responses(tiny_pair, tmp_path, reference):
    """`--decoder reference` (batch by batch, every row to its batch's end) and the default
    speculative decoder (rows refilled across prompts) sample the same table on the CPU, at
    batch sizes smaller and larger than a prompt's 4 samples; a resume with the other decoder
    is refused (on a GPU it decides the batches)."""
    for batch_size in (3, 64):
        config = _config(batch_size=batch_size, decoder="reference")
        frame, _ = _run(tmp_path, tiny_pair[0], f"reference-{batch_size}", config)
        assert frame.equals(reference)
    with pytest.raises(DivscopeError, match='decoder: was "reference", now "speculative"'):
        _run(tmp_path, tiny_pair[0], "reference-3", _config(batch_size=3), resume=True)


def test_resumes_where_an_interrupted_run_stopped(tiny_pair, tmp_path, reference):
    out = tmp_path / "traj"
    _run(tmp_path, tiny_pair[0], "traj", _config())
    (out / "part-000001.parquet").unlink()  # as if stopped before the second prompt finished
    with pytest.raises(DivscopeError, match="pass --resume to continue it or --overwrite"):
        _run(tmp_path, tiny_pair[0], "traj", _config())
    frame, report = _run(tmp_path, tiny_pair[0], "traj", _config(), resume=True)
    assert (report.n_resumed, report.n_responses) == (2, 4)
    assert frame.equals(reference)
    with pytest.raises(DivscopeError, match=r"other settings or inputs \(seed: was 0, now 5\)"):
        _run(tmp_path, tiny_pair[0], "traj", _config(seed=5), resume=True)
    _, report = _run(tmp_path, tiny_pair[0], "traj", _config(seed=5), overwrite=True)
    assert (report.n_resumed, report.n_responses) == (0, 12)


def test_a_run_that_failed_before_any_prompt_can_be_rerun_with_other_settings(tiny_pair, tmp_path):
    with pytest.raises(DivscopeError, match="context of 64"):
        _run(tmp_path, tiny_pair[0], "traj", _config(max_new_tokens=100))
    _, report = _run(tmp_path, tiny_pair[0], "traj", _config(n=1, max_new_tokens=4))
    assert report.n_responses == 3


def test_single_file_output_is_assembled_from_the_parts(tiny_pair, tmp_path, reference):
    frame, _ = _run(tmp_path, tiny_pair[0], "traj.parquet", _config())
    assert frame.equals(reference)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompts.jsonl", "traj.parquet"]
    with pytest.raises(DivscopeError, match="output exists; pass --overwrite"):
        _run(tmp_path, tiny_pair[0], "traj.parquet", _config())


def test_output_reads_as_trajectories_and_text_matches_ids(tiny_pair, tmp_path, reference):
    from transformers import AutoTokenizer

    reference.write_parquet(tmp_path / "t.parquet")
    frame = read_trajectories(tmp_path / "t.parquet")
    tokenizer = AutoTokenizer.from_pretrained(tiny_pair[0])
    for row in frame.iter_rows(named=True):
        assert row["response"] == tokenizer.decode(row["response_ids"], skip_special_tokens=True)


def test_chat_template(tiny_pair, tmp_path):
    from transformers import AutoTokenizer

    model = tmp_path / "chat-model"
    tokenizer = AutoTokenizer.from_pretrained(tiny_pair[0])
    tokenizer.chat_template = (
        "<bos>{% for m in messages %} w0 {{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %} w1{% endif %}"
    )
    tokenizer.save_pretrained(model)
    for name in ("config.json", "model.safetensors"):
        (model / name).write_bytes((tiny_pair[0] / name).read_bytes())
    frame, _ = _run(tmp_path, model, "chat", _config(n=1, chat=Chat(chat_template=True)))
    row = frame.filter(prompt_id="p1").row(0, named=True)
    assert row["prompt"] == "<bos> w0 w9 w1"
    assert row["prompt_ids"] == [1, 4, 13, 5]  # one BOS, from the template
    with pytest.raises(DivscopeError, match="has no chat template"):
        _run(tmp_path, tiny_pair[0], "plain", _config(n=1, chat=Chat(chat_template=True)))


@pytest.mark.parametrize(
    "rows, config, message",
    [
        ([{"prompt_id": "a", "question": "w1"}], _config(), "prompts need 'prompt'"),
        (
            [{"prompt_id": "a", "prompt_ids": [1, 5]}],
            _config(chat=Chat(chat_template=True)),
            "not 'prompt_ids'",
        ),
        ([{"prompt_id": "a", "prompt_ids": [1, 99]}], _config(), "token id 99, outside"),
        ([{"prompt_id": "a", "prompt": "w1"}], _config(max_new_tokens=100), "context of 64"),
    ],
)
def test_bad_input(tiny_pair, tmp_path, rows, config, message):
    prompts = _prompts(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DivscopeError, match=message):
        generate(prompts, str(tiny_pair[0]), tmp_path / "out", config, progress=False)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"engine": "tgi"}, "--engine 'tgi': use one of hf, vllm"),
        ({"sampling": Sampling(n=0)}, "--n must be >= 1"),
        ({"sampling": Sampling(temperature=0.0)}, "--temperature must be > 0"),
        ({"sampling": Sampling(top_p=1.5)}, r"--top-p must be in \(0, 1\]"),
        ({"sampling": Sampling(max_new_tokens=0)}, "--max-new-tokens must be >= 1, got 0"),
        ({"batch_size": 0}, "--batch-size must be >= 1, got 0"),
        ({"decoder": "fast"}, "--decoder must be one of speculative, reference, got 'fast'"),
    ],
)
def test_bad_config(kwargs, message):
    with pytest.raises(DivscopeError, match=message):
        GenerateConfig(**kwargs)


def test_a_prompt_too_long_fails_before_any_part_is_written(tiny_pair, tmp_path):
    rows = [{"prompt_id": "short", "prompt": "w1"}, {"prompt_id": "long", "prompt": "w1 " * 60}]
    with pytest.raises(DivscopeError, match="prompt_id='long' has 60 tokens.*to 4"):
        generate(_prompts(tmp_path / "p.jsonl", rows), str(tiny_pair[0]), tmp_path / "out",
                 _config(n=1, max_new_tokens=8, batch_size=1), progress=False)  # fmt: skip
    assert not list((tmp_path / "out").glob("part-*"))
