"""Benchmark: a 7B-shaped model pair on one GPU, decoding with each decoder, and scoring.

    python bench/gpu_pair.py                          # CUDA: Qwen2.5-7B shapes in bf16
    python bench/gpu_pair.py --device cpu --tiny      # the smoke path: tiny shapes on the CPU

The pair is built in memory on the device by `bench/decode.py`'s `random_pair` (random
weights, no download): Qwen2 with Qwen2.5-7B's shapes (hidden 3584, 28 layers, 28 heads, 4 KV
heads, intermediate 18944, vocabulary 152,064), in bf16; rl is base with every weight moved by
a small share of its spread. About 31 GB of GPU memory for the two.

Decoding: `--requests` random prompts of 32 to 128 tokens, `--batch-size` rows at a time,
under forward (eps 0.05) at budget 4 and unbudgeted; a random `--eos-share` of the vocabulary
ends a response, so rows end at different steps. Per decoder (`DecodeConfig.decoder`):

- pair-tokens/s: tokens emitted per second of wall time, and the wall ms per step (a step is
  a forward of the primary model, `DecodeStats.steps`);
- from `torch.profiler` over a short decode of one batch (`--profile-tokens` new tokens,
  prefill included), per step: the host's busy ms (wall time less the time spent waiting in
  synchronizing CUDA calls; the profiler's own cost included, so an upper bound), host syncs
  (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize and cudaMemcpy calls),
  kernel launches (launch calls; a CUDA graph launch counts one) and kernels run on the GPU.

Scoring: `--score-rows` trajectories of random ids (64 prompt tokens, responses of a quarter of
`--score-length` to all of it: `bench/score.py --ragged`'s) scored by
`divscope.scoring.score_trajectories` (its batches planned for the GPU's free memory), against
two bare decoder forwards, base's and rl's, over the same right-padded batches, without a
padding mask (as the engine runs them) and with one (`bench/score.py`'s `padded_forwards`);
tokens/s of each.

On the CPU (`--device cpu --tiny`) the counts of syncs and kernels are 0: the path runs, to
check it, not to measure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # divscope, the tests' helpers, decode.py
from decode import DECODERS, random_pair, random_requests, stop_ids, synchronize  # noqa: E402

QWEN_7B = dict(hidden=3584, layers=28, heads=28, kv_heads=4, intermediate=18944, vocab=152_064)
"""Qwen2.5-7B's shapes."""
TINY = dict(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, vocab=1_024)
"""The smoke path's shapes."""
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")
"""CUDA runtime calls that make the host wait for the device."""


def profiled(run, device: str) -> dict:
    """Run `run()` under `torch.profiler`: its wall seconds, the seconds the host waited in
    `SYNCS` calls, and how many such calls, kernel launches and kernels it made."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    synchronize(device)
    start = time.perf_counter()
    with profile(activities=activities) as profiler:
        run()
        synchronize(device)
    wall = time.perf_counter() - start
    events = profiler.events()
    syncs = [e for e in events if e.name in SYNCS]
    gpu = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    return {
        "wall": wall,
        "waited": sum(e.time_range.elapsed_us() for e in syncs) / 1e6,
        "syncs": len(syncs),
        "launches": sum(
            e.name.startswith(("cudaLaunch", "cuLaunch")) or e.name == "cudaGraphLaunch"
            for e in events
        ),
        "kernels": sum(
            not e.name.startswith(("Memcpy", "Memset")) and "Sync" not in e.name for e in gpu
        ),  # fmt: skip
    }


def decoding(args, models, vocab: int) -> None:
    """Pair-tokens/s and the per-step costs of each decoder (see the module docstring)."""
    from dataclasses import replace
    from functools import partial

    from divscope.decoding.lockstep import DecodeConfig, DecodeStats, decode
    from divscope.decoding.policies import Forward

    requests = random_requests(args.requests, vocab, shortest=32, longest=128)
    stops = stop_ids(vocab, args.eos_share)
    policy = Forward(eps=0.05)
    print(f"decoding: {len(requests)} requests, batch size {args.batch_size}, up to "
          f"{args.new_tokens} new tokens, {len(stops)} stop ids; profiled: one batch, "
          f"{args.profile_tokens} new tokens")  # fmt: skip
    header = (
        f"{'setting':<20} {'decoder':<11} {'mean len':>8} {'sw/tok':>6} {'pair-tok/s':>10} "
        f"{'ms/step':>7} | per step, profiled: {'host ms':>7} {'syncs':>5} {'launches':>8} "
        f"{'kernels':>7}"
    )
    print(header + "\n" + "-" * len(header), flush=True)
    warm = DecodeConfig(max_new_tokens=4, batch_size=args.batch_size)
    for decoder in DECODERS:  # a warm-up: kernels' first calls, allocator pools
        decode(models, requests[:2], policy, replace(warm, decoder=decoder), vocab=vocab,
               eos_ids=stops)  # fmt: skip
    for budget in (4, -1):
        budgeted = [replace(r, budget=budget) for r in requests]
        for decoder in DECODERS:
            config = DecodeConfig(
                max_new_tokens=args.new_tokens, batch_size=args.batch_size, decoder=decoder
            )
            stats = DecodeStats()
            synchronize(args.device)
            start = time.perf_counter()
            decoded = decode(models, budgeted, policy, config, vocab=vocab, eos_ids=stops,
                             stats=stats)  # fmt: skip
            synchronize(args.device)
            wall = time.perf_counter() - start
            short = DecodeStats()
            first = budgeted[: args.batch_size]
            short_config = replace(config, max_new_tokens=args.profile_tokens)
            run = partial(decode, models, first, policy, short_config, vocab=vocab, eos_ids=stops,
                          stats=short)  # fmt: skip
            counts = profiled(run, args.device)
            steps = max(short.steps, 1)
            emitted = sum(len(d.response_ids) for d in decoded)
            switches = sum(d.n_switches for d in decoded)
            setting = "forward " + ("unbudgeted" if budget < 0 else f"budget {budget}")
            print(
                f"{setting:<20} {decoder:<11} {emitted / len(decoded):>8.1f} "
                f"{switches / emitted:>6.3f} {emitted / wall:>10,.0f} "
                f"{1000 * wall / max(stats.steps, 1):>7.1f} |                     "
                f"{1000 * (counts['wall'] - counts['waited']) / steps:>7.1f} "
                f"{counts['syncs'] / steps:>5.1f} {counts['launches'] / steps:>8.0f} "
                f"{counts['kernels'] / steps:>7.0f}",
                flush=True,
            )


def scoring(args, models, vocab: int) -> None:
    """The scoring engine against two bare decoder forwards over its own padded batches,
    without and with a padding mask (`bench/score.py --ragged`'s trajectories and forwards)."""
    from score import TOP_P, padded_forwards, trajectory

    from divscope.scoring import ScoreConfig, StatsConfig, score_trajectories
    from tests.tinymodels import make_tokenizer

    base, rl = models["base"], models["rl"]
    frame = trajectory(args.score_length, vocab, args.score_rows, ragged=True)
    tokenizer = make_tokenizer([f"w{i}" for i in range(vocab - 4)])  # 4 specials: `vocab` ids
    config = ScoreConfig(StatsConfig(top_p=TOP_P))
    runs = {
        "engine": lambda: score_trajectories(
            frame, base, rl, tokenizer, config, sink=lambda table: None, progress=False
        ),
        "forwards": lambda: padded_forwards(frame, base, rl, vocab, masked=False),
        "masked forwards": lambda: padded_forwards(frame, base, rl, vocab, masked=True),
    }
    seconds, batches = {}, {}
    for name, run in runs.items():
        run()  # a warm-up
        synchronize(args.device)
        start = time.perf_counter()
        batches[name] = run()
        synchronize(args.device)
        seconds[name] = time.perf_counter() - start
    tokens = sum(len(ids) for ids in frame["response_ids"].to_pylist())
    shape = batches["forwards"]
    print(
        f"\nscoring: {args.score_rows} trajectories of 64 prompt and {args.score_length // 4} to "
        f"{args.score_length} response tokens ({tokens:,} in all), {shape['batches']} padded "
        f"batches ({shape['padded_share']:.0%} padding); tokens/s: "
        + ", ".join(f"{name} {tokens / value:,.0f}" for name, value in seconds.items())
        + f"; the engine takes {seconds['engine'] / seconds['forwards']:.2f}x the two unmasked "
        "forwards' time"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes, float32 (smoke path)")
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--profile-tokens", type=int, default=16)
    parser.add_argument("--eos-share", type=float, default=0.005)
    parser.add_argument("--score-rows", type=int, default=64)
    parser.add_argument("--score-length", type=int, default=1024, help="longest response")
    args = parser.parse_args()

    import torch

    shape, dtype = (TINY, "float32") if args.tiny else (QWEN_7B, "bfloat16")
    start = time.perf_counter()
    models = random_pair(**shape, device=args.device, dtype=dtype, qwen=True)
    parameters = sum(p.numel() for p in models["base"].parameters()) / 1e9
    where = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "CPU"
    print(f"random Qwen2 pair, {parameters:.2f}B parameters each, {dtype}, on {where} "
          f"(built in {time.perf_counter() - start:.0f} s); torch {torch.__version__}")  # fmt: skip
    decoding(args, models, shape["vocab"])
    scoring(args, models, shape["vocab"])


if __name__ == "__main__":
    main()
