"""The lab's shared tokenizer: byte-level BPE trained with `tokenizers` on the task's text.

As in GPT-2 style tokenizers, words carry their leading space (`Ġlet`), text is split by the
byte-level pre-tokenizer's regex (letters, digits and punctuation apart) and BPE merges pieces
by frequency, so frequent numbers are one token and rare ones split. Responses start with a space,
so tokenizing a prompt and a response separately gives the ids of their concatenation.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from divscope.lab.task import TaskConfig, corpus_solution, sample_problem, teacher_solution

EOS, PAD = "<|endoftext|>", "<|pad|>"

PORTABLE_CLASS = "PreTrainedTokenizerFast"
"""The tokenizer class `save_tokenizer` names: every supported transformers loads it (4.x by this
name, 5.x as an alias of `TokenizersBackend`, the name 5.x's `save_pretrained` writes and 4.x
does not know)."""


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


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, path: str | Path) -> None:
    """Write `tokenizer.json` and a `tokenizer_config.json` naming `PORTABLE_CLASS` into `path`:
    the same two files, and the same token ids, whichever transformers release writes or reads
    them (`save_pretrained` writes the class name and files of the installed release).

    Args:
        tokenizer: a fast tokenizer with EOS and PAD tokens (`build_tokenizer`).
        path: the directory (created if missing).

    >>> import tempfile
    >>> from transformers import AutoTokenizer
    >>> from divscope.lab.task import TaskConfig
    >>> tokenizer = build_tokenizer(TaskConfig(), vocab_size=300, n_problems=50)
    >>> with tempfile.TemporaryDirectory() as path:
    ...     save_tokenizer(tokenizer, path)
    ...     loaded = AutoTokenizer.from_pretrained(path)
    ...     sorted(p.name for p in Path(path).iterdir())
    ['tokenizer.json', 'tokenizer_config.json']
    >>> loaded.encode(" 14 - 4 = 10.") == tokenizer.encode(" 14 - 4 = 10.")
    True
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.backend_tokenizer.save(str(path / "tokenizer.json"))
    config = {
        "clean_up_tokenization_spaces": False,
        "eos_token": tokenizer.eos_token,
        "model_max_length": tokenizer.model_max_length,
        "pad_token": tokenizer.pad_token,
        "tokenizer_class": PORTABLE_CLASS,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
