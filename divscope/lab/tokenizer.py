"""The lab's shared tokenizer: byte-level BPE trained with `tokenizers` on the task's text.

As in GPT-2 style tokenizers, words carry their leading space (`Ġlet`), text is split by the
byte-level pre-tokenizer's regex (letters, digits and punctuation apart) and BPE merges pieces
by frequency, so frequent numbers are one token and rare ones split. Responses start with a space,
so tokenizing a prompt and a response separately gives the ids of their concatenation.
"""

from __future__ import annotations

import random

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from divscope.lab.task import TaskConfig, corpus_solution, sample_problem, teacher_solution

EOS, PAD = "<|endoftext|>", "<|pad|>"


def training_texts(config: TaskConfig, n_problems: int, seed: int) -> list[str]:
    """Seeded sample of the text the models see: prompts with corpus and teacher solutions."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n_problems):
        problem = sample_problem(rng, config)
        texts.append(problem.prompt + corpus_solution(problem, rng, config))
        texts.append(problem.prompt + teacher_solution(problem))
    return texts


def build_tokenizer(
    config: TaskConfig, *, vocab_size: int = 768, n_problems: int = 4000, seed: int = 0
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `training_texts`; `save_pretrained` writes a standard
    `tokenizer.json` that `AutoTokenizer.from_pretrained` loads.

    Args:
        config: the task whose text is learned.
        vocab_size: vocabulary size, special tokens and the 256 byte tokens included.
        n_problems: problems sampled for the training text.
        seed: seed of the sample.
    """
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(training_texts(config, n_problems, seed), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=EOS,
        pad_token=PAD,
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )
