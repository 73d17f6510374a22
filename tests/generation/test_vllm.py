"""The vLLM engine: exercised only where vLLM is installed (`pip install 'divscope[vllm]'`)."""

import importlib.util
import json

import pytest

from divscope import generate
from divscope.errors import DivscopeError
from divscope.generation import GenerateConfig, Sampling
from divscope.io import read_table

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed")
def test_without_vllm_the_engine_is_a_clear_error(tiny_pair, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt_id": "a", "prompt": "w1"}) + "\n")
    config = GenerateConfig(Sampling(n=1, max_new_tokens=4), engine="vllm")
    with pytest.raises(DivscopeError, match=r"pip install 'divscope\[vllm\]'"):
        generate(prompts, str(tiny_pair[0]), tmp_path / "out", config, progress=False)


@pytest.mark.gpu
def test_vllm_writes_the_same_schema_and_repeats_with_the_seed(tiny_pair, tmp_path):
    pytest.importorskip("vllm")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt_id": "a", "prompt": "w1 w2"}) + "\n")
    config = GenerateConfig(Sampling(n=4, max_new_tokens=8, seed=3), engine="vllm")
    frames = []
    for name in ("one", "two"):
        generate(prompts, str(tiny_pair[0]), tmp_path / name, config, progress=False)
        frames.append(read_table(tmp_path / name))
    assert frames[0].equals(frames[1])
    assert frames[0]["sample_id"].to_list() == [0, 1, 2, 3]
    assert (frames[0]["n_tokens"] <= 8).all()
