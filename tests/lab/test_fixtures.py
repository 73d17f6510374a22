"""The committed lab family under fixtures/lab loads with plain transformers and behaves."""

import hashlib
import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from divscope.grading import get_grader
from divscope.lab.grpo import GRPOConfig
from divscope.lab.sampling import generate
from divscope.lab.task import PLAN_SENTENCES
from divscope.lab.tokenizer import EOS, PAD, PORTABLE_CLASS, save_tokenizer

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
MODELS = sorted(p.name for p in LAB.iterdir() if (p / "config.json").exists())
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def _eval_rows(n: int) -> list[dict]:
    with (LAB / "prompts" / "eval.jsonl").open() as f:
        return [json.loads(line) for line, _ in zip(f, range(n), strict=False)]


def test_family_is_complete_and_small():
    steps = [m for m in MODELS if m.startswith("rl-step-")]
    assert {"base", "rl", "sft"} <= set(MODELS)
    assert len(steps) >= 4
    weights = sum(f.stat().st_size for m in MODELS for f in (LAB / m).glob("*.safetensors"))
    assert weights <= 40 * 2**20
    assert len(_eval_rows(10_000)) >= 200


def test_every_model_dir_carries_the_same_tokenizer():
    for name in TOKENIZER_FILES:
        digests = {hashlib.sha256((LAB / m / name).read_bytes()).hexdigest() for m in MODELS}
        assert len(digests) == 1, name


def test_the_tokenizer_is_saved_in_the_form_every_supported_transformers_reads(tmp_path):
    # transformers 5's save_pretrained names `TokenizersBackend`, which 4.x cannot load; the
    # lab writes `PreTrainedTokenizerFast` (save_tokenizer), and writes the committed files again
    # byte for byte from the tokenizer they hold.
    config = json.loads((LAB / "base" / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == PORTABLE_CLASS
    save_tokenizer(AutoTokenizer.from_pretrained(LAB / "base", local_files_only=True), tmp_path)
    for name in TOKENIZER_FILES:
        assert (tmp_path / name).read_bytes() == (LAB / "base" / name).read_bytes(), name


@pytest.mark.parametrize("name", MODELS)
def test_model_loads_offline_with_auto_classes(name):
    model = AutoModelForCausalLM.from_pretrained(LAB / name, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(LAB / name, local_files_only=True)
    assert model.config.vocab_size == len(tokenizer)
    assert (tokenizer.eos_token, tokenizer.pad_token) == (EOS, PAD)
    prompt = _eval_rows(1)[0]["prompt"]
    ids = tokenizer(prompt, add_special_tokens=False).input_ids
    assert tokenizer.decode(ids) == prompt


def test_rl_beats_base_greedily_on_64_eval_prompts():
    rows = _eval_rows(64)
    grade = get_grader("lab")
    accuracy = {}
    for name in ("base", "rl"):
        model = AutoModelForCausalLM.from_pretrained(LAB / name, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(LAB / name, local_files_only=True)
        prompts = [tokenizer(r["prompt"], add_special_tokens=False).input_ids for r in rows]
        with torch.no_grad():
            responses = generate(
                model,
                prompts,
                eos_id=tokenizer.eos_token_id,
                max_new_tokens=GRPOConfig().max_new_tokens,
                temperature=None,
            )
        texts = tokenizer.batch_decode(responses, skip_special_tokens=True)
        accuracy[name] = sum(grade(t, r["answer"]) for t, r in zip(texts, rows, strict=True)) / 64
    assert accuracy["rl"] > accuracy["base"], accuracy


@pytest.mark.parametrize(
    "file,models", [("trajectories.jsonl", {"base", "rl"}), ("trajectories-sft.jsonl", {"sft"})]
)
def test_trajectories_follow_the_contract(file, models):
    rows = [json.loads(line) for line in (LAB / file).open()]
    assert (LAB / file).stat().st_size < 4 * 2**20
    keys = {(r["prompt_id"], r["sample_id"]) for r in rows}
    assert len(keys) == len(rows)
    assert {r["model"] for r in rows} == models
    tokenizer = AutoTokenizer.from_pretrained(LAB / "base", local_files_only=True)
    grade = get_grader("lab")
    for r in rows[:50]:
        assert tokenizer(r["prompt"], add_special_tokens=False).input_ids == r["prompt_ids"]
        assert tokenizer.decode(r["response_ids"], skip_special_tokens=True) == r["response"]
        assert grade(r["response"], r["answer"]) == r["correct"]


def test_lab_and_math_graders_agree_on_every_trajectory():
    lab, math = get_grader("lab"), get_grader("math")
    for file in ("trajectories.jsonl", "trajectories-sft.jsonl"):
        for r in map(json.loads, (LAB / file).open()):
            assert bool(math(r["response"], r["answer"])) is r["correct"], r["response"]
            assert lab(r["response"], r["answer"]) is r["correct"]


def _right_plan_probability(name: str, rows: list[dict]) -> float:
    """Mean probability of the right plan's first word as the response's first token."""
    tokenizer = AutoTokenizer.from_pretrained(LAB / name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(LAB / name, local_files_only=True)
    first = {
        plan: tokenizer(sentence, add_special_tokens=False).input_ids[0]
        for plan, sentence in PLAN_SENTENCES.items()
    }
    total = 0.0
    for r in rows:
        ids = torch.tensor([tokenizer(r["prompt"], add_special_tokens=False).input_ids])
        with torch.no_grad():
            probs = torch.softmax(model(input_ids=ids).logits[0, -1], dim=-1)
        right = "backward" if " has some " in r["prompt"] else "forward"
        total += probs[first[right]].item()
    return total / len(rows)


def test_base_is_uncertain_at_the_plan_and_rl_decides_it():
    rows = _eval_rows(32)
    base, rl = (_right_plan_probability(name, rows) for name in ("base", "rl"))
    assert 0.3 < base < 0.75  # the right plan is in base's top-p 0.7 nucleus, not alone in it
    assert rl > 0.9


@pytest.mark.slow
def test_divergence_is_sparse_and_its_decisions_are_spread(lab_tokens_path):
    import polars as pl

    from divscope.io import read_token_table

    lab_tokens = read_token_table(lab_tokens_path)
    rl_own = lab_tokens.filter(pl.col("sample_id") >= 4)  # rl's samples follow base's 0-3
    assert rl_own.select((pl.col("js") < 1e-3).mean()).item() >= 0.8
    high = lab_tokens.filter(pl.col("js") > 0.1)
    # several decisions, none of them the whole story ...
    assert high.group_by("token").len()["len"].max() <= 0.4 * high.height
    # ... from the plan at the start to the answer's format at the end
    quintiles = (pl.col("rel_position") * 5).floor().clip(0, 4)
    assert high.select(quintiles.n_unique()).item() >= 3
    # the plan, the first response token, is among the most divergent positions
    plan = lab_tokens.filter(pl.col("position") == 0)["js"].median()
    assert plan >= lab_tokens["js"].quantile(0.95)
