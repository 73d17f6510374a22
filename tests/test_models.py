import pytest
import torch

from divscope.errors import DivscopeError
from divscope.models.loading import describe_model, load_model
from divscope.models.placement import resolve_device, resolve_dtype
from divscope.models.tokenizers import load_tokenizer, vocab_size
from tests.tinymodels import make_tokenizer


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


def _with_generation_eos(model, eos):
    model.generation_config.eos_token_id = eos
    return model


def test_stop_ids_are_the_union_of_every_models_eos_with_one_warning():
    from divscope.errors import DivscopeWarning
    from divscope.models.tokenizers import stop_ids
    from tests.tinymodels import make_model

    tokenizer = make_tokenizer()  # EOS "<eos>" = 2
    base = _with_generation_eos(make_model("llama", vocab_size=48), None)
    rl = _with_generation_eos(make_model("llama", vocab_size=48, seed=1), [7, 2])
    tokenizers = {"base": tokenizer, "rl": tokenizer}
    with pytest.warns(DivscopeWarning, match=r"stop at different tokens.*base: 2 '<eos>'"):
        ids = stop_ids(tokenizers, {"base": base, "rl": rl}, vocab=44)
    assert ids == [2, 7]
    with pytest.warns(DivscopeWarning):
        assert stop_ids(tokenizers, {"base": base, "rl": rl}, ["w5", "11"], vocab=44) == [
            2, 7, tokenizer.convert_tokens_to_ids("w5"), 11,
        ]  # fmt: skip
    same = {"base": base, "rl": _with_generation_eos(make_model("llama", vocab_size=48), 2)}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DivscopeWarning)  # the same stop set: no warning
        assert stop_ids(tokenizers, same, vocab=44) == [2]


def test_stop_must_be_one_token_or_an_id():
    from divscope.models.tokenizers import stop_ids
    from tests.tinymodels import make_model

    tokenizers, models = {"m": make_tokenizer()}, {"m": make_model("llama", vocab_size=48)}
    with pytest.raises(DivscopeError, match="--stop 'w5 w6' is 2 tokens"):
        stop_ids(tokenizers, models, ["w5 w6"], vocab=44)
    with pytest.raises(DivscopeError, match="--stop 99: the vocabulary has ids 0..43"):
        stop_ids(tokenizers, models, ["99"], vocab=44)


def test_one_dtype_per_run_read_from_the_first_model(tmp_path):
    """float32 on the CPU whatever the checkpoints say; on GPUs the first model's dtype."""
    from divscope.models.loading import load_models
    from divscope.models.placement import run_dtype
    from tests.tinymodels import make_model

    paths = {}
    for name, dtype in (("base", torch.bfloat16), ("rl", torch.float16)):
        make_model("llama", vocab_size=48).to(dtype).save_pretrained(tmp_path / name)
        make_tokenizer().save_pretrained(tmp_path / name)
        paths[name] = str(tmp_path / name)
    assert run_dtype("auto", "cpu", None, paths["base"]) == torch.float32
    on_gpu = {"model": 0, "lm_head": 0}  # a device map naming GPU 0: the checkpoint's dtype
    assert run_dtype("auto", "cpu", on_gpu, paths["base"]) == torch.bfloat16
    assert run_dtype("auto", "cpu", on_gpu, paths["rl"]) == torch.float16
    assert run_dtype("auto", "cpu", {"": "cpu"}, paths["base"]) == torch.float32
    models = load_models(paths, dtype="auto", device="cpu", device_map=None)
    assert {m.dtype for m in models.values()} == {torch.float32}
    models = load_models(paths, dtype="bfloat16", device="cpu", device_map=None)
    assert {m.dtype for m in models.values()} == {torch.bfloat16}


def test_length_limits_cap_the_default_and_refuse_an_explicit_overflow():
    from divscope.models.lengths import new_token_limits

    prompts = [("a", [1] * 10), ("b", [1] * 300)]
    assert new_token_limits(prompts, None, {"base": 320, "rl": 4096}) == [310, 20]
    assert new_token_limits(prompts, None, {"base": None}) == [8000, 8000]
    assert new_token_limits(prompts, 16, {"base": 320}) == [16, 16]
    with pytest.raises(DivscopeError, match="prompt_id='b' has 300 tokens.*Lower --max-new"):
        new_token_limits(prompts, 21, {"base": 320})
    with pytest.raises(DivscopeError, match="fills the base model's context"):
        new_token_limits([("c", [1] * 320)], None, {"base": 320})


def test_a_device_map_places_the_model_with_accelerate(tiny_pair):
    """`--device-map` goes through accelerate: here every module on the CPU, the head named
    on its own, as a split map names it."""
    model = load_model(str(tiny_pair[0]), device_map={"model": "cpu", "lm_head": "cpu"})
    reference = load_model(str(tiny_pair[0]), device="cpu")
    ids = torch.tensor([[5, 6, 7]])
    with torch.inference_mode():
        assert torch.equal(model(input_ids=ids).logits, reference(input_ids=ids).logits)
