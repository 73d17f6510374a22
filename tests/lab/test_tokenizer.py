import random

import pytest
from transformers import AutoTokenizer

from divscope.lab.model import ModelConfig, new_model
from divscope.lab.task import TaskConfig, corpus_solution, sample_problem, teacher_solution
from divscope.lab.tokenizer import EOS, PAD, build_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(TaskConfig(), n_problems=1000)


def test_texts_round_trip_and_prompt_and_response_tokenize_apart_as_together(tokenizer):
    config = TaskConfig()
    rng = random.Random(7)
    for _ in range(300):
        problem = sample_problem(rng, config)
        for response in (corpus_solution(problem, rng, config), teacher_solution(problem)):
            prompt = tokenizer(problem.prompt, add_special_tokens=False).input_ids
            answer = tokenizer(response, add_special_tokens=False).input_ids
            together = tokenizer(problem.prompt + response, add_special_tokens=False).input_ids
            assert together == prompt + answer
            assert tokenizer.decode(answer) == response
            assert tokenizer.decode(together) == problem.prompt + response


def test_words_carry_their_leading_space_and_numbers_split_as_bpe_splits_them(tokenizer):
    pieces = tokenizer.convert_ids_to_tokens(
        tokenizer(" Wait, undoing a loss adds it back: 12 + 5 = 17.").input_ids
    )
    assert pieces[:2] == ["ĠWait", ","]
    assert "Ġ12" in pieces and "Ġ17" in pieces
    # Numbers above the task's range are rare in the training text: BPE splits them.
    assert len(tokenizer(" 987").input_ids) > 1


def test_special_tokens_size_and_determinism(tokenizer):
    assert (tokenizer.eos_token, tokenizer.pad_token) == (EOS, PAD)
    assert tokenizer.convert_ids_to_tokens([0, 1]) == [EOS, PAD]
    assert 256 < len(tokenizer) <= 768
    again = build_tokenizer(TaskConfig(), n_problems=1000)
    assert again.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()


def test_auto_tokenizer_loads_it_from_a_model_dir(tokenizer, tmp_path):
    config = ModelConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1)
    new_model(config, tokenizer, seed=0).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = (
        "Sam has 9 coins. Step 1: he finds 3. Step 2: he loses 5. How many coins does he have now?"
    )
    assert loaded(text).input_ids == tokenizer(text).input_ids
    assert loaded.eos_token_id == tokenizer.eos_token_id
    assert loaded.pad_token_id == tokenizer.pad_token_id
