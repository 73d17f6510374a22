"""The lab's shared tokenizer: one token per whitespace-separated word of the task language.

A word-level vocabulary keeps every decision a single token (`forward` / `backward`) and every
number and step a single token, so per-token divergence reads directly as per-decision divergence.
Text is single-space separated, so `decode(encode(text)) == text` and tokenizing a prompt and a
response separately gives the same ids as tokenizing their concatenation.
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from divscope.lab.task import TaskConfig, format_step

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
WORDS = (
    "Q:",
    "A:",
    "?",
    "=",
    ";",
    "find",
    "start",
    "end",
    "plan:",
    "forward",
    "backward",
    "answer:",
)


def vocabulary(config: TaskConfig) -> list[str]:
    """All tokens in id order: special tokens, task words, numbers, steps."""
    numbers = [str(n) for n in range(config.max_value + 1)]
    steps = [format_step(s) for s in range(-config.max_step, config.max_step + 1) if s != 0]
    return [PAD, EOS, UNK, *WORDS, *numbers, *steps]


def build_tokenizer(config: TaskConfig) -> PreTrainedTokenizerFast:
    """A `PreTrainedTokenizerFast` over the task vocabulary; `save_pretrained` makes it loadable
    by `AutoTokenizer.from_pretrained`."""
    vocab = {token: i for i, token in enumerate(vocabulary(config))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        model_max_length=64,
        clean_up_tokenization_spaces=False,
    )
