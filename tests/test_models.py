import pytest
import torch

from divscope.errors import DivscopeError
from divscope.models import (
    check_same_tokenizer,
    describe_model,
    load_model,
    load_tokenizer,
    resolve_device,
    resolve_dtype,
    vocab_size,
)
from tests.tinymodels import WORDS, make_tokenizer


def test_load_saved_pair(tiny_pair):
    base, _ = tiny_pair
    model = load_model(str(base), dtype="float32", device="cpu")
    tokenizer = load_tokenizer(str(base))
    assert not model.training
    assert vocab_size(tokenizer) == 44
    assert model.get_output_embeddings().weight.shape[0] == 48
    info = describe_model(model, str(base))
    assert info["dtype"] == "float32" and info["architecture"] == "LlamaForCausalLM"


def test_load_bfloat16(tiny_pair):
    model = load_model(str(tiny_pair[1]), dtype="bfloat16", device="cpu")
    assert next(model.parameters()).dtype == torch.bfloat16


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(DivscopeError, match="could not load its config"):
        load_model(str(tmp_path / "nowhere"))


def test_tokenizer_mismatch_names_first_differing_token():
    words = list(WORDS)
    words[7] = "other"
    with pytest.raises(DivscopeError, match="token id 11 is 'w7' for base but 'other' for rl"):
        check_same_tokenizer(make_tokenizer(), make_tokenizer(words))
    with pytest.raises(DivscopeError, match="differ in size: 44 vs 43"):
        check_same_tokenizer(make_tokenizer(), make_tokenizer(WORDS[:-1]))
    check_same_tokenizer(make_tokenizer(), make_tokenizer())


@pytest.mark.parametrize(
    "dtype,device,checkpoint,expected",
    [
        ("auto", "cpu", torch.bfloat16, torch.float32),
        ("auto", "cuda", "bfloat16", torch.bfloat16),
        ("auto", "cuda", torch.float16, torch.float16),
        ("auto", "cuda", None, torch.bfloat16),
        ("float16", "cpu", None, torch.float16),
    ],
)
def test_resolve_dtype(dtype, device, checkpoint, expected):
    assert resolve_dtype(dtype, device, checkpoint) == expected


def test_bad_device_and_dtype():
    with pytest.raises(DivscopeError, match="use auto, cpu, cuda or cuda:N"):
        resolve_device("tpu")
    with pytest.raises(DivscopeError, match="--dtype 'int8'"):
        resolve_dtype("int8", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(DivscopeError, match="no CUDA device"):
            resolve_device("cuda:0")
