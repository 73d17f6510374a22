"""Model names (`divscope.models.names`): the parser, models loaded by revision and subfolder
from a Hub cache offline (`offline_hub`), the revisions in the metadata, and the refusal of a
verl FSDP checkpoint with its merge command."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from divscope.errors import DivscopeError
from divscope.models.loading import describe_model, load_model
from divscope.models.names import ModelName, parse
from divscope.models.pair import model_names, open_pair
from divscope.models.tokenizers import load_tokenizer
from divscope.params import ModelPair

LAB = "fixtures/lab"


@pytest.mark.parametrize(
    "given, revision, subfolder, expected",
    [
        ("Qwen/Qwen2.5-Math-7B", None, None, ModelName("Qwen/Qwen2.5-Math-7B")),
        ("gpt2", None, None, ModelName("gpt2")),
        ("gpt2@v1", None, None, ModelName("gpt2", "v1")),
        ("org/run@step-400", None, None, ModelName("org/run", "step-400")),
        ("org/run", "step-400", None, ModelName("org/run", "step-400")),
        ("org/run@step-400", "step-400", None, ModelName("org/run", "step-400")),
        ("org/run@refs/pr/3", None, None, ModelName("org/run", "refs/pr/3")),
        ("org/run/step-400", None, None, ModelName("org/run", None, "step-400")),
        ("org/run/ckpt/step-4@a1b2", None, None, ModelName("org/run", "a1b2", "ckpt/step-4")),
        ("org/run", None, "step-400", ModelName("org/run", None, "step-400")),
        ("org/run/step-400", None, "step-400", ModelName("org/run", None, "step-400")),
        (f"{LAB}/rl", None, None, ModelName(f"{LAB}/rl")),  # an existing directory
        (f"{LAB}/rl", None, "sub", ModelName(f"{LAB}/rl", None, "sub")),
        ("./missing/dir/model", None, None, ModelName("./missing/dir/model")),
        ("/missing/dir/model", None, None, ModelName("/missing/dir/model")),
    ],
)
def test_parse(given, revision, subfolder, expected):
    name = parse(given, revision=revision, subfolder=subfolder)
    assert name == expected
    assert parse(str(name)) == expected or name.id.startswith(LAB)  # round trip


@pytest.mark.parametrize(
    "given, revision, subfolder, message",
    [
        ("org/run@a", "b", None, "--rl org/run@a names revision 'a', --rl-revision 'b'"),
        ("org/run/x", None, "y", "--rl org/run/x names subfolder 'x', --subfolder 'y'"),
        ("org/run@", None, None, "an empty revision"),
        (f"{LAB}/rl", "step-1", None, "is a local directory, which has no revisions"),
    ],
)
def test_parse_refuses(given, revision, subfolder, message):
    with pytest.raises(DivscopeError, match=message.replace("(", r"\(")):
        parse(given, revision=revision, subfolder=subfolder)


def test_an_existing_directory_with_an_at_is_a_directory(tmp_path):
    model = shutil.copytree(f"{LAB}/rl", tmp_path / "rl@step-30")
    assert parse(str(model)) == ModelName(str(model))
    assert load_tokenizer(str(model)).vocab_size == load_tokenizer(f"{LAB}/rl").vocab_size


def test_the_pair_reads_each_models_revision_and_the_rl_subfolder():
    pair = ModelPair("org/base@v1", "org/run", rl_revision="step-4", subfolder="ckpt")
    assert model_names(pair) == {
        "base": ModelName("org/base", "v1"),
        "rl": ModelName("org/run", "step-4", "ckpt"),
    }
    with pytest.raises(DivscopeError, match="--base org/base@v1 names revision 'v1', "):
        model_names(ModelPair("org/base@v1", "org/run", base_revision="v2"))


def _weights(model) -> torch.Tensor:
    return model.get_output_embeddings().weight.detach()


def test_a_revision_loads_that_revisions_weights(offline_hub):
    main = offline_hub.add("org/run", Path(f"{LAB}/rl-step-30"))
    step = offline_hub.add("org/run", Path(f"{LAB}/rl"), revision="step-1")
    assert main != step
    at_main, at_step = load_model("org/run"), load_model("org/run@step-1")
    assert torch.equal(_weights(at_main), _weights(load_model(f"{LAB}/rl-step-30")))
    assert torch.equal(_weights(at_step), _weights(load_model(f"{LAB}/rl")))
    assert not torch.equal(_weights(at_main), _weights(at_step))
    described = describe_model(at_step, "org/run@step-1")
    assert (described["name_or_path"], described["revision"]) == ("org/run", "step-1")
    assert described["commit_hash"] == step


def test_the_pair_loads_rl_revision_and_records_it(offline_hub):
    step = offline_hub.add("org/run", Path(f"{LAB}/rl"), revision="step-1")
    offline_hub.add("org/run", Path(f"{LAB}/rl-step-30"))
    pair = open_pair(ModelPair(f"{LAB}/base", "org/run", rl_revision="step-1"))
    loaded = pair.load()
    assert torch.equal(_weights(loaded["rl"]), _weights(load_model(f"{LAB}/rl")))
    models = pair.describe(loaded)
    assert models["rl"]["revision"] == "step-1" and models["rl"]["commit_hash"] == step
    assert models["base"]["revision"] is None and models["base"]["commit_hash"] is None


def test_a_subfolder_holds_the_model_and_the_root_the_tokenizer(offline_hub):
    # The final model at the repository's root, an intermediate checkpoint without tokenizer
    # files in step-60/ (as a trainer's checkpoints are often uploaded).
    offline_hub.add("org/checkpoints", Path(f"{LAB}/rl"))
    for file in Path(f"{LAB}/rl-step-60").iterdir():
        if "tokenizer" not in file.name:
            offline_hub.add("org/checkpoints", file, folder=f"step-60/{file.name}")
    model = load_model("org/checkpoints/step-60")
    assert torch.equal(_weights(model), _weights(load_model(f"{LAB}/rl-step-60")))
    pair = open_pair(ModelPair(f"{LAB}/base", "org/checkpoints", subfolder="step-60"))
    assert pair.paths["rl"] == ModelName("org/checkpoints", None, "step-60")
    assert len(pair.tokenizers["rl"]) == len(pair.tokenizers["base"])
    assert pair.describe({"rl": model})["rl"]["subfolder"] == "step-60"


def test_a_model_missing_from_the_offline_cache_names_itself(offline_hub):
    with pytest.raises(DivscopeError, match=r"model 'org/absent@step-1': could not load"):
        load_model("org/absent@step-1")


def _verl_checkpoint(root, *, fsdp_config: bool = True, whole: bool = False):
    """A verl FSDP checkpoint's layout (verl/utils/checkpoint/fsdp_checkpoint_manager.py):
    `global_step_N/actor/` with one model, optimizer and extra-state shard per rank, the
    `fsdp_config.json` (recent verl releases) and a `huggingface/` folder (config and tokenizer; the
    whole weights too when `hf_model` is among the checkpoint's contents)."""
    actor = root / "global_step_40" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    for rank in range(2):
        for kind in ("model", "optim", "extra_state"):
            (actor / f"{kind}_world_size_2_rank_{rank}.pt").write_bytes(b"")
    if fsdp_config:
        (actor / "fsdp_config.json").write_text('{"FSDP_version": 1, "world_size": 2}')
    for file in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(f"{LAB}/rl/{file}", actor / "huggingface" / file)
    if whole:
        shutil.copyfile(f"{LAB}/rl/model.safetensors", actor / "huggingface/model.safetensors")
    return actor


def test_a_verl_fsdp_checkpoint_gets_the_merge_command(tmp_path):
    actor = _verl_checkpoint(tmp_path)
    command = (
        f"python -m verl.model_merger merge --backend fsdp --local_dir {actor} "
        f"--target_dir {actor.parent / 'merged_hf_model'}"
    )
    for given, subfolder in ((actor, None), (actor.parent, None), (tmp_path, "global_step_40")):
        with pytest.raises(DivscopeError) as raised:  # the actor folder, the step's, the run's
            open_pair(ModelPair(f"{LAB}/base", str(given), subfolder=subfolder))
        given = Path(given, subfolder or "")
        message = str(raised.value)
        assert f"--rl {given}: a verl FSDP checkpoint" in message
        assert f"\n    {command}\nthen pass --rl {actor.parent / 'merged_hf_model'}." in message


def test_an_old_verl_checkpoint_gets_the_legacy_script_and_whole_weights_a_shortcut(tmp_path):
    actor = _verl_checkpoint(tmp_path, fsdp_config=False, whole=True)
    with pytest.raises(DivscopeError) as raised:
        load_model(str(actor))
    message = str(raised.value)
    assert "python scripts/legacy_model_merger.py merge --backend fsdp --local_dir" in message
    assert f"or pass --rl {actor / 'huggingface'}, which holds the whole weights" in message
    load_model(str(actor / "huggingface"))  # which loads
