"""Benchmark: `forward` cross-sampling (two models in lockstep) vs transformers' `generate`.

    python bench/decode.py                          # batches 1 8 32, 64 new tokens
    python bench/decode.py --models fixtures/lab    # the lab's base/ and rl/ instead
    python bench/decode.py --device cuda --vocab 151936 --hidden 1024 --layers 8
    python bench/decode.py --device cuda --models fixtures/lab   # loaded in bfloat16 on a GPU

Both sides decode the same batch (prompts of the same length), the same number of new tokens
(EOS disabled, so every row runs to the cap) and the same sampling settings (T=1, top-p 0.7,
no top-k), measured side by side in this process, best of `--repeats` after a warm-up:

- `generate`: `model.generate` of the base model alone, KV cache, sampling;
- `forward`:  `divscope.decoding.decode` with `Forward(eps)` and an unlimited budget: both
  models step every token, the per-step JS and both coupled draws are computed.

Two models do twice the model work, so 0.5x of `generate` is parity; the target is 0.4x.
Without `--models`, a random Llama pair of the given shape is built in memory.

A second table measures the lean decode loop where responses end at different steps (the lab
models' own EOS, on the first prompts of `--prompts` when given; for random models, a random
`--eos-share` of the vocabulary stops a row):
`forward` as it runs, against the same decode keeping finished rows in the batch to the end
(`drop_finished=False`) and against that with transformers' `DynamicCache` instead of the
preallocated one. The tokens are the same in all three (checked).
"""

from __future__ import annotations

import argparse
import time


def build_models(args):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    if args.models:
        from divscope.models.loading import load_model
        from divscope.models.tokenizers import load_tokenizer

        models = {
            name: load_model(f"{args.models}/{name}", device=args.device) for name in ("base", "rl")
        }
        return models, len(load_tokenizer(f"{args.models}/base"))
    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=4 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=max(args.hidden // 64, 1),
        num_key_value_heads=max(args.hidden // 128, 1),
        max_position_embeddings=args.prompt + args.new_tokens + 8,
        tie_word_embeddings=False,
    )
    models = {}
    for seed, name in enumerate(("base", "rl")):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        with torch.no_grad():  # logits spread over several nats, as a trained model's are
            model.lm_head.weight.mul_(8.0)
        models[name] = model.to(args.device).eval()
    return models, args.vocab


def time_best(fn, repeats: int) -> float:
    import torch

    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="a directory holding base/ and rl/ (e.g. fixtures/lab)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=32_000)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--eos-share", type=float, default=0.03, help="random models: share of stop ids"
    )
    parser.add_argument("--prompts", help="lean loop: real prompts (e.g. the lab's eval.jsonl)")
    args = parser.parse_args()

    import torch

    from divscope.decoding import DecodeConfig, Request, build_policy, decode
    from divscope.scoring.metrics import StatsConfig

    if args.threads:
        torch.set_num_threads(args.threads)
    models, vocab = build_models(args)
    base = models["base"]
    limit = base.config.max_position_embeddings
    if args.prompt + args.new_tokens > limit:
        raise SystemExit(f"--prompt + --new-tokens exceeds the models' context of {limit}")
    never = -1  # an EOS id that no model emits: every row runs to the cap on both sides
    print(
        f"models: {args.models or 'random Llama'}, vocab {vocab}, "
        f"{sum(p.numel() for p in base.parameters()) / 1e6:.1f}M parameters each, "
        f"{str(base.dtype).removeprefix('torch.')} on {args.device}, threads "
        f"{torch.get_num_threads()}; prompt {args.prompt}, "
        f"{args.new_tokens} new tokens, T=1, top-p 0.7"
    )
    print(f"{'batch':>5} {'generate tok/s':>15} {'forward tok/s':>14} {'ratio':>6}")
    for batch in args.batches:
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(3, vocab, (batch, args.prompt), generator=generator)
        requests = [Request(f"p{i}", 0, tuple(row.tolist()), -1) for i, row in enumerate(ids)]
        sampling = StatsConfig(temperature=1.0, top_p=0.7)
        config = DecodeConfig(sampling, max_new_tokens=args.new_tokens, batch_size=batch)
        policy = build_policy("forward", eps=0.05)

        def run_generate(ids=ids):
            with torch.inference_mode():
                out = base.generate(
                    input_ids=ids.to(args.device),
                    attention_mask=torch.ones_like(ids).to(args.device),
                    do_sample=True,
                    temperature=1.0,
                    top_p=0.7,
                    top_k=0,
                    max_new_tokens=args.new_tokens,
                    min_new_tokens=args.new_tokens,
                    eos_token_id=None,
                    pad_token_id=0,
                )
            assert out.shape[1] == args.prompt + args.new_tokens

        def run_forward(requests=requests, config=config, policy=policy):
            decoded = decode(models, requests, policy, config, vocab=vocab, eos_ids=[never])
            assert all(len(d.response_ids) == args.new_tokens for d in decoded)

        tokens = batch * args.new_tokens
        generate_rate = tokens / time_best(run_generate, args.repeats)
        forward_rate = tokens / time_best(run_forward, args.repeats)
        print(
            f"{batch:>5} {generate_rate:>15,.0f} {forward_rate:>14,.0f} "
            f"{forward_rate / generate_rate:>5.2f}x"
        )
    lean_loop(args, models, vocab)


def lean_loop(args, models, vocab: int) -> None:
    """The lean loop against keeping finished rows, and against transformers' cache."""
    import torch

    import divscope.decoding.lockstep as lockstep
    from divscope.decoding import DecodeConfig, Request, build_policy, decode
    from divscope.models.tokenizers import load_tokenizer
    from divscope.scoring.metrics import StatsConfig

    prompts = None
    if args.models:
        tokenizer = load_tokenizer(f"{args.models}/base")
        stops = [tokenizer.eos_token_id]
        if args.prompts:
            from divscope.prompts import prompt_token_ids, read_prompts_arrow

            frame = read_prompts_arrow(args.prompts).slice(0, max(args.batches))
            prompts = prompt_token_ids(frame, tokenizer, source=args.prompts)
    else:
        generator = torch.Generator().manual_seed(1)
        stops = torch.randperm(vocab, generator=generator)[: int(args.eos_share * vocab)].tolist()
    policy = build_policy("forward", eps=0.05)
    new_cache = lockstep.new_cache
    print(f"\nlean loop, forward, rows ending at their stop tokens ({len(stops)} stop ids)")
    print(f"{'batch':>5} {'mean len':>8} {'lean tok/s':>11} {'keep rows':>10} "
          f"{'+DynamicCache':>14} {'lean/keep':>9} {'lean/both':>9}")  # fmt: skip
    for batch in args.batches:
        if prompts is None:
            generator = torch.Generator().manual_seed(0)
            ids = torch.randint(3, vocab, (batch, args.prompt), generator=generator).tolist()
        else:
            ids = prompts[:batch]
        requests = [Request(f"p{i}", 0, tuple(row), -1) for i, row in enumerate(ids)]
        results = {}

        def run(drop: bool, cache: bool, requests=requests, batch=batch, results=results):
            lockstep.new_cache = new_cache if cache else (lambda *a, **k: None)
            config = DecodeConfig(
                StatsConfig(temperature=1.0, top_p=0.7), max_new_tokens=args.new_tokens,
                batch_size=batch, drop_finished=drop,
            )  # fmt: skip
            results[drop, cache] = decode(
                models, requests, policy, config, vocab=vocab, eos_ids=stops
            )

        seconds = {
            key: time_best(lambda key=key: run(*key), args.repeats)
            for key in ((True, True), (False, True), (False, False))
        }
        lockstep.new_cache = new_cache
        assert results[True, True] == results[False, True] == results[False, False]
        tokens = sum(len(d.response_ids) for d in results[True, True])
        rate = {key: tokens / value for key, value in seconds.items()}
        lean, keep, both = rate[True, True], rate[False, True], rate[False, False]
        print(f"{batch:>5} {tokens / batch:>8.1f} {lean:>11,.0f} {keep:>10,.0f} {both:>14,.0f} "
              f"{lean / keep:>8.2f}x {lean / both:>8.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
