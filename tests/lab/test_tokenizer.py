import random

import pytest
from transformers import AutoTokenizer

from divscope.lab.model import ModelConfig, new_model
from divscope.lab.task import TaskConfig, corpus_solution, sample_problem
from divscope.lab.tokenizer import build_tokenizer, vocabulary


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(TaskConfig())


def test_every_word_of_the_task_is_one_known_token(tokenizer):
    config = TaskConfig()
    rng = random.Random(0)
    for _ in range(200):
        problem = sample_problem(rng, config)
        text = problem.prompt + " " + corpus_solution(problem, rng, config)
        ids = tokenizer(text, add_special_tokens=False).input_ids
        assert len(ids) == len(text.split())
        assert tokenizer.unk_token_id not in ids
        assert tokenizer.decode(ids) == text


def test_prompt_and_response_tokenize_separately_as_together(tokenizer):
    prompt, response = "Q: ? -2 -7 = 0 ; find start A:", "plan: backward ; 0 +7 = 7 ; answer: 7"
    together = tokenizer(prompt + " " + response, add_special_tokens=False).input_ids
    apart = [tokenizer(t, add_special_tokens=False).input_ids for t in (prompt, response)]
    assert together == apart[0] + apart[1]


def test_special_tokens_and_size(tokenizer):
    assert len(tokenizer) == len(vocabulary(TaskConfig()))
    assert tokenizer.convert_ids_to_tokens([0, 1, 2]) == ["<pad>", "<eos>", "<unk>"]
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id) == (0, 1)


def test_auto_tokenizer_loads_it_from_a_model_dir(tokenizer, tmp_path):
    config = ModelConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1)
    new_model(config, tokenizer, seed=0).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "Q: 9 +3 = ? ; find end A: plan: forward ; 9 +3 = 12 ; answer: 12"
    assert loaded(text).input_ids == tokenizer(text).input_ids
    assert loaded.eos_token_id == tokenizer.eos_token_id
