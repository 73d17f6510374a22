import torch

from divscope.lab.model import ModelConfig, new_model
from divscope.lab.sampling import generate
from divscope.lab.task import TaskConfig
from divscope.lab.tokenizer import build_tokenizer


def test_a_left_padded_batch_decodes_each_prompt_as_alone():
    tokenizer = build_tokenizer(TaskConfig(), n_problems=200)
    config = ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2)
    model = new_model(config, tokenizer, seed=1).eval()
    texts = ["Sam has 9 coins.", "Mia has some apples. She eats 6 and picks 2.", "Tom"]
    prompts = [tokenizer(t, add_special_tokens=False).input_ids for t in texts]
    kwargs = {"eos_id": tokenizer.eos_token_id, "max_new_tokens": 12, "temperature": None}
    together = generate(model, prompts, **kwargs)
    alone = [generate(model, [p], **kwargs)[0] for p in prompts]
    assert together == alone
    assert all(len(r) == 12 or r[-1] == tokenizer.eos_token_id for r in together)
    sampled = [
        generate(
            model,
            prompts,
            generator=torch.Generator().manual_seed(5),
            **kwargs | {"temperature": 1.0},
        )
        for _ in range(2)
    ]
    assert sampled[0] == sampled[1]
