"""Tiny real HF models and tokenizers built on the fly (no downloads), shared by the tests."""

from __future__ import annotations

from pathlib import Path

WORDS = [f"w{i}" for i in range(40)]


def make_tokenizer(words: list[str] = WORDS, *, specials: bool = True):
    """A real word-level `PreTrainedTokenizerFast`: BOS/EOS/PAD/UNK specials, then `words`;
    with `specials=False` exactly `words` (id i is `words[i]`, and `words[0]` doubles as UNK)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    names = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"} if specials else {}
    tokens = ["<pad>", "<bos>", "<eos>", "<unk>", *words] if specials else list(words)
    unk = "<unk>" if specials else words[0]
    backend = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(tokens)}, unk_token=unk))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token=unk, **names)


def make_model(
    arch: str = "qwen2",
    vocab_size: int = 44,
    seed: int = 0,
    max_positions: int = 64,
    *,
    layers: int = 2,
    logit_scale: float = 1.0,
):
    """A tiny randomly initialized causal LM of a standard architecture, float32, eval mode.

    `logit_scale` multiplies the random output head so that logits spread over several nats,
    as trained models' do.
    """
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    config_class = {"qwen2": Qwen2Config, "llama": LlamaConfig}[arch]
    config = config_class(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    if logit_scale != 1.0:
        with torch.no_grad():
            model.get_output_embeddings().weight.mul_(logit_scale)  # [vocab, hidden]
    return model


def save_pair(root: Path, *, arch: str = "llama", vocab_size: int = 48) -> tuple[Path, Path]:
    """Save a base/rl pair of tiny models with the same tokenizer under `root`.

    Llama, not Qwen2: transformers 5's AutoTokenizer maps model_type qwen2 to Qwen2Tokenizer,
    which cannot hold a word-level tokenizer.
    """
    tokenizer = make_tokenizer()
    paths = []
    for name, seed in (("base", 0), ("rl", 1)):
        path = root / name
        make_model(arch, vocab_size=vocab_size, seed=seed).save_pretrained(path)
        tokenizer.save_pretrained(path)
        paths.append(path)
    return paths[0], paths[1]
