"""The vLLM engine: its options are checked everywhere; sampling runs only where vLLM and a CUDA
device are (`pip install 'divscope[vllm]'`, `-m gpu`), with one engine per test process."""

import enum
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import polars as pl
import pytest
import torch

from divscope import generate
from divscope.errors import DivscopeError
from divscope.generation import GenerateConfig, Sampling, VLLMOptions
from divscope.generation.generate import _settings
from divscope.io import read_table
from divscope.params import SinglePlacement
from divscope.schema import GENERATED

HAS_VLLM = importlib.util.find_spec("vllm") is not None
LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
SAMPLING = Sampling(n=4, max_new_tokens=48, seed=3)
EOS = 2  # the tiny pair's EOS id (tokenizer and generation config)


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed")
def test_without_vllm_the_engine_is_a_clear_error_and_writes_nothing(tiny_pair, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt_id": "a", "prompt": "w1"}) + "\n")
    options = VLLMOptions(tensor_parallel_size=2, gpu_memory_utilization=0.5, max_model_len=32)
    config = GenerateConfig(Sampling(n=1, max_new_tokens=4), engine="vllm", vllm=options)
    with pytest.raises(DivscopeError, match=r"pip install 'divscope\[vllm\]'"):
        generate(prompts, str(tiny_pair[0]), tmp_path / "out", config, progress=False)
    assert not (tmp_path / "out").exists()


def test_only_the_vllm_option_that_changes_samples_is_a_setting():
    options = VLLMOptions(tensor_parallel_size=2, gpu_memory_utilization=0.5, max_model_len=32)
    config = GenerateConfig(Sampling(n=1, max_new_tokens=4), engine="vllm", vllm=options)
    chat = {"chat_template": False, "system_prompt": None}
    settings = _settings("m", config, chat, ["a"], [[5]])
    assert settings["tensor_parallel_size"] == 2
    assert not {"gpu_memory_utilization", "max_model_len"} & settings.keys()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tensor_parallel_size": 0}, "--tensor-parallel-size must be >= 1, got 0"),
        ({"gpu_memory_utilization": 0.0}, r"--gpu-memory-utilization must be in \(0, 1\]"),
        ({"gpu_memory_utilization": 1.5}, r"--gpu-memory-utilization must be in \(0, 1\]"),
        ({"max_model_len": 0}, "--max-model-len must be >= 1, got 0"),
    ],
)
def test_bad_options(kwargs, message):
    with pytest.raises(DivscopeError, match=message):
        VLLMOptions(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"vllm": VLLMOptions(tensor_parallel_size=2, max_model_len=4096)},
            "--tensor-parallel-size 2, --max-model-len 4096: vLLM option",
        ),
        (
            {"vllm": VLLMOptions(gpu_memory_utilization=0.5)},
            "--gpu-memory-utilization 0.5: vLLM option.*pass --engine vllm",
        ),
        ({"engine": "vllm", "batch_size": 8}, "--batch-size 8: not used by --engine vllm"),
        ({"engine": "vllm", "decoder": "reference"}, "--decoder reference: not used by --engine"),
    ],
)
def test_options_of_the_other_engine_are_refused(kwargs, message):
    with pytest.raises(DivscopeError, match=message):
        GenerateConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"device": "cpu"}, "--device cpu: not used by --engine vllm"),
        ({"device_map": "auto"}, "--device-map: not used by --engine vllm"),
    ],
)
def test_hf_placement_with_vllm_is_refused_before_any_work(tiny_pair, tmp_path, kwargs, message):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt_id": "a", "prompt": "w1"}) + "\n")
    config = GenerateConfig(engine="vllm")
    with pytest.raises(DivscopeError, match=message):
        generate(prompts, str(tiny_pair[0]), tmp_path / "out", config, SinglePlacement(**kwargs),
                 progress=False)  # fmt: skip
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- the loop, on a stand-in vLLM


class _Engine:
    """vLLM's `LLMEngine` as `VLLMEngine` drives it: each `step` finishes the latest request
    still queued (after an unfinished output of another), its samples out of index order."""

    def __init__(self, max_model_len: int, lose: bool = False) -> None:
        self.model_config = SimpleNamespace(max_model_len=max_model_len)
        self.queue: dict[str, tuple[list[int], SimpleNamespace]] = {}
        self.params: list[SimpleNamespace] = []
        self.aborted: list[str] = []
        self.lose = lose  # drop a request without an output, as a broken vLLM would

    def add_request(self, request_id, prompt, params):
        self.queue[request_id] = (prompt["prompt_token_ids"], params)
        self.params.append(params)

    def has_unfinished_requests(self) -> bool:
        return bool(self.queue)

    def step(self):
        request_id, (_, params) = self.queue.popitem()
        if self.lose:
            return []
        samples = [
            SimpleNamespace(index=i, token_ids=[5 + i, 2], finish_reason="stop")
            if i % 2
            else SimpleNamespace(index=i, token_ids=[5] * params.max_tokens, finish_reason="length")
            for i in reversed(range(params.n))
        ]
        others = [SimpleNamespace(request_id=r, finished=False, outputs=[]) for r in self.queue]
        return [*others[:1], SimpleNamespace(request_id=request_id, finished=True, outputs=samples)]

    def abort_request(self, request_ids):
        self.aborted += request_ids
        for request_id in request_ids:
            self.queue.pop(request_id, None)  # vLLM ignores ids it no longer holds


@pytest.fixture
def stand_in(monkeypatch):
    """A stand-in `vllm` module; `.llms` holds the `LLM`s made."""
    vllm = ModuleType("vllm")
    vllm.__version__ = "0.0-stand-in"
    vllm.llms = []
    vllm.SamplingParams = SimpleNamespace

    class LLM:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            self.llm_engine = _Engine(kwargs["max_model_len"] or 64)
            vllm.llms.append(self)

    vllm.LLM = LLM
    sampling_params = ModuleType("vllm.sampling_params")
    sampling_params.RequestOutputKind = enum.Enum(
        "RequestOutputKind", "CUMULATIVE DELTA FINAL_ONLY"
    )
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling_params)
    return vllm


def test_every_prompt_is_queued_up_front_and_written_when_done(stand_in, tiny_pair, tmp_path):
    from divscope.decoding.randomness import prompt_key

    rows = [{"prompt_id": f"p{i}", "prompt": f"w{i + 1}"} for i in range(3)]
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    options = VLLMOptions(gpu_memory_utilization=0.5, max_model_len=48)
    config = GenerateConfig(Sampling(n=3, max_new_tokens=4, seed=9), engine="vllm", vllm=options)
    report = generate(prompts, str(tiny_pair[0]), tmp_path / "out", config, progress=False)
    (llm,) = stand_in.llms
    assert llm.kwargs == {
        "model": str(tiny_pair[0]), "dtype": "auto", "seed": 9, "tensor_parallel_size": 1,
        "gpu_memory_utilization": 0.5, "max_model_len": 48,
    }  # fmt: skip
    final_only = sys.modules["vllm.sampling_params"].RequestOutputKind.FINAL_ONLY
    for row, params in zip(rows, llm.llm_engine.params, strict=True):
        assert params.seed == (9 ^ prompt_key(row["prompt_id"])) % 2**63
        assert (params.n, params.max_tokens, params.output_kind) == (3, 4, final_only)
        assert params.stop_token_ids == [EOS] and not params.detokenize
    assert (report.n_responses, report.n_finished, report.n_tokens) == (9, 3, 30)
    frame = read_table(tmp_path / "out").sort("prompt_id", "sample_id")
    assert frame["response_ids"].to_list() == [[5] * 4, [6, 2], [5] * 4] * 3
    assert frame["finished"].to_list() == [False, True, False] * 3


def _stand_in_engine(tiny_pair, sampling: Sampling):
    from divscope.generation import VLLMEngine
    from divscope.models.tokenizers import load_tokenizer

    return VLLMEngine(str(tiny_pair[0]), load_tokenizer(str(tiny_pair[0])), sampling)


def test_a_stopped_run_leaves_no_request_in_the_engine(stand_in, tiny_pair):
    engine = _stand_in_engine(tiny_pair, Sampling(n=2))
    stream = engine.sample([("a", [5]), ("b", [6]), ("c", [7, 8])])
    assert next(stream)[0] == 2  # the last queued finishes first here
    stream.close()
    assert engine.llm.llm_engine.aborted == ["divscope-0-0", "divscope-0-1"]
    # No --max-new-tokens: each prompt is capped by vLLM's context (64 here).
    assert [p.max_tokens for p in engine.llm.llm_engine.params] == [63, 63, 62]
    assert [index for index, _ in engine.sample([("a", [5])])] == [0]  # new request ids


def test_a_prompt_vllm_never_returns_is_an_error(stand_in, tiny_pair):
    engine = _stand_in_engine(tiny_pair, Sampling(n=2, max_new_tokens=3))
    engine.llm.llm_engine.lose = True
    with pytest.raises(
        DivscopeError, match=r"stopped without returning 1 prompt\(s\), e.g. prompt_id='a'"
    ):
        list(engine.sample([("a", [5])]))


# ---------------------------------------------------------------- on a GPU with vLLM


def _lab_prompts(n: int) -> list[dict]:
    return [json.loads(line) for line in (LAB / "prompts" / "eval.jsonl").open()][:n]


@pytest.fixture(scope="module")
def vllm_engine():
    """One vLLM engine on the lab's base model for the whole module (a second one would have
    to fit next to the first, which vLLM keeps until the process ends), on 30% of the GPU so
    that the other GPU tests of the session still fit."""
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from divscope.generation import VLLMEngine
    from divscope.models.tokenizers import load_tokenizer

    options = VLLMOptions(gpu_memory_utilization=0.3, max_model_len=320)
    tokenizer = load_tokenizer(str(LAB / "base"))
    return VLLMEngine(str(LAB / "base"), tokenizer, SAMPLING, options=options)


@pytest.mark.gpu
def test_the_same_prompts_give_the_same_samples(vllm_engine):
    from divscope.models.tokenizers import load_tokenizer
    from divscope.prompts import prompt_token_ids

    tokenizer = load_tokenizer(str(LAB / "base"))
    frame = pl.DataFrame(_lab_prompts(8))
    ids = prompt_token_ids(frame, tokenizer, source="eval")
    prompts = list(zip(frame["prompt_id"].to_list(), ids, strict=True))
    first = dict(vllm_engine.sample(prompts))
    vllm_engine.llm.reset_prefix_cache()  # as a fresh process would: prefill from scratch
    second = dict(vllm_engine.sample(prompts))
    assert sorted(first) == list(range(len(prompts)))
    assert first == second
    for samples in first.values():
        assert len(samples) == SAMPLING.n
        for sample in samples:
            assert 1 <= len(sample.response_ids) <= SAMPLING.max_new_tokens
            ended = sample.response_ids[-1] == tokenizer.eos_token_id
            assert sample.finished == ended
            assert sample.finished or len(sample.response_ids) == SAMPLING.max_new_tokens
    assert len({tuple(s.response_ids) for samples in first.values() for s in samples}) > 1


@pytest.mark.gpu
def test_each_prompt_is_written_as_soon_as_its_samples_are_done(vllm_engine, tmp_path, monkeypatch):
    import divscope.generation.generate as module

    out = tmp_path / "traj"
    seen_on_disk: list[bool] = []

    class Watched:
        """The fixture's engine, checking before each prompt that the earlier ones are on disk."""

        def check(self, prompts):
            vllm_engine.check(prompts)

        def sample(self, prompts):
            yielded = []
            for index, samples in vllm_engine.sample(prompts):
                parts = {p.name for p in out.glob("part-*.parquet")}
                seen_on_disk.append(parts == {f"part-{i:06d}.parquet" for i in yielded})
                yielded.append(index)
                yield index, samples

    monkeypatch.setattr(module, "_engine", lambda *args: Watched())
    rows = _lab_prompts(6)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = GenerateConfig(SAMPLING, engine="vllm")
    report = generate(prompts, str(LAB / "base"), out, config, progress=False)
    assert seen_on_disk == [True] * len(rows)
    assert report.n_responses == len(rows) * SAMPLING.n
    assert sorted(p.name for p in out.glob("part-*")) == [f"part-{i:06d}.parquet" for i in range(6)]
    frame = read_table(out).sort("prompt_id", "sample_id")
    assert frame.columns == [*GENERATED, "answer"]
    assert frame.select(list(GENERATED)).schema == pl.Schema(GENERATED)
    assert frame.group_by("prompt_id").agg(pl.col("sample_id").sort()).sort("prompt_id").rows() == [
        (r["prompt_id"], list(range(SAMPLING.n))) for r in rows
    ]
    manifest = json.loads((out / "manifest.json").read_text())["settings"]
    assert (manifest["engine"], manifest["tensor_parallel_size"]) == ("vllm", 1)


def test_a_revision_reaches_vllm_and_a_hub_subfolder_is_refused(stand_in, tiny_pair, offline_hub):
    from divscope.generation import VLLMEngine
    from divscope.models.tokenizers import load_tokenizer

    offline_hub.add("org/run", tiny_pair[1], revision="step-1")
    engine = VLLMEngine("org/run@step-1", load_tokenizer("org/run@step-1"), Sampling())
    kwargs = engine.llm.kwargs
    assert (kwargs["model"], kwargs["revision"], kwargs["tokenizer_revision"]) == (
        "org/run", "step-1", "step-1",
    )  # fmt: skip
    with pytest.raises(DivscopeError, match="vLLM reads no subfolder of a repository.*"
                       "hf download org/run --include 'step-1/\\*' --local-dir DIR"):  # fmt: skip
        VLLMEngine("org/run/step-1", load_tokenizer("org/run@step-1"), Sampling())
