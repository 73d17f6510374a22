"""Benchmark: divscope's scoring engine vs the naive per-sequence path, whole process each.

    python bench/score.py                      # lengths 512 1024 2048 4096; naive at 512 1024
    python bench/score.py --lengths 512 --naive-lengths 512
    python bench/score.py --lengths 512 --naive-lengths 512 --responses 8   # start-up amortized
    python bench/score.py --device cuda --lengths 512 2048 --naive-lengths 512 --responses 4
    python bench/score.py --device cuda --ragged --lengths 2048 --responses 64  # padded batches
    python bench/score.py --device cuda:0 --rl-device cuda:1 --ragged --lengths 2048 --responses 64

A tiny Qwen2 pair with a real-size vocabulary (151,936) is built once in a temporary
directory. Every measurement is a fresh subprocess (`--child`) that loads the models, scores
`--responses` trajectories (default 1; a 64-token prompt and a response of the given length
each) and writes a Parquet table, so wall time and peak RSS (from `os.wait4`) cover the whole
process. Three children:

- `engine`: `divscope.scoring.score_trajectories` streaming into `TokenTableWriter`;
- `naive`:  the way public scripts do it (below): per sequence, the full `[T, V]` float32
  softmax of both models, a full sort per model for top-p, full sorts for ranks and top-k,
  every statistic computed separately;
- `forward`: two bare forward passes that only produce the logits (the floor).

`--ragged`: the responses of each length run from a quarter of it to all of it, so the engine's
batches are padded, and the engine is measured against two bare decoder forwards over the same
padded batches (the engine's own packing at its planned `batch_tokens`): `padded` without a
padding mask (the causal mask alone, as the engine runs them) and `masked` with one (a 4-D mask,
which keeps SDPA off its flash kernels). With `--rl-device` the RL model sits there, and the
engine and `padded` run the two forwards at once.

The naive path needs about 12 GB at 1,024 tokens and cannot fit 4,096 in 24 GB, so it runs
only at `--naive-lengths`. Results are printed as a table of ratios measured in this run. With
`--device cuda` every child runs its models on the GPU (float32, as on the CPU) and also reports
its peak GPU memory (`gpu_peak_mib`); the peak RSS is then the host side only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VOCAB = 151_936
PROMPT = 64
TOP_P = 0.7
SEED = 0


# ---------------------------------------------------------------- the tiny model pair


def build_pair(root: Path, vocab: int, logit_scale: float) -> None:
    """Save base/, rl/ (a perturbed copy) and a word-level tokenizer of `vocab` tokens."""
    import torch
    from tokenizers import Tokenizer, models
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config

    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
    )
    torch.manual_seed(SEED)
    base = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():
        # Spread the random head's logits over several nats, as a trained model's are, so
        # that nuclei are tens of tokens rather than most of the vocabulary.
        base.get_output_embeddings().weight.mul_(logit_scale)
    rl = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    rl.load_state_dict(base.state_dict())
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for parameter in rl.parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.add_(0.3 * parameter.std() * noise)
    # The last id is Qwen2's <|endoftext|>, which its tokenizer class would otherwise add.
    words = {f"t{i}": i for i in range(vocab - 1)} | {"<|endoftext|>": vocab - 1}
    backend = Tokenizer(models.WordLevel(words, unk_token="t0"))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="t0", eos_token="<|endoftext|>"
    )
    for name, model in (("base", base), ("rl", rl)):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)


def trajectory(length: int, vocab: int, responses: int = 1, ragged: bool = False):
    """`responses` trajectories: a 64-token prompt and a response of `length` tokens each, or
    with `ragged` of `length // 4` to `length` tokens (fixed seeds; the first is the same
    whatever `responses` is)."""
    import pyarrow as pa
    import torch

    rows = []
    for sample in range(responses):
        generator = torch.Generator().manual_seed(SEED + length + 7919 * sample)
        size = length
        if ragged:
            size = int(torch.randint(length // 4, length + 1, (1,), generator=generator))
        ids = torch.randint(0, vocab, (PROMPT + size,), generator=generator).tolist()
        rows.append(
            {"prompt_id": "bench", "sample_id": sample, "prompt_ids": ids[:PROMPT],
             "response_ids": ids[PROMPT:]}
        )  # fmt: skip
    return pa.Table.from_pylist(rows)


# ---------------------------------------------------------------- the naive path


def naive_stats(lb, lr, tokens, top_p: float, temperature: float = 1.0) -> dict:
    """Peers' way: full [T, V] softmaxes, full sorts, every statistic on its own."""
    import torch

    pb, pr = torch.softmax(lb, -1), torch.softmax(lr, -1)
    log_pb, log_pr = torch.log_softmax(lb, -1), torch.log_softmax(lr, -1)
    out = {
        "logp_base": log_pb.gather(-1, tokens[:, None])[:, 0],
        "logp_rl": log_pr.gather(-1, tokens[:, None])[:, 0],
        "entropy_base": -(pb * log_pb).nan_to_num().sum(-1),
        "entropy_rl": -(pr * log_pr).nan_to_num().sum(-1),
        "kl_base_rl": (pb * (log_pb - log_pr)).nan_to_num().sum(-1),
        "kl_rl_base": (pr * (log_pr - log_pb)).nan_to_num().sum(-1),
        "ce_base_rl": -(pb * log_pr).nan_to_num().sum(-1),
    }

    def js(p, q):
        log_m = torch.log(0.5 * (p + q))
        kl_pm = (p * (torch.log(p) - log_m)).nan_to_num().sum(-1)
        kl_qm = (q * (torch.log(q) - log_m)).nan_to_num().sum(-1)
        return 0.5 * kl_pm + 0.5 * kl_qm

    def top_p_renormalized(logits):
        probs = torch.softmax(logits / temperature, -1)
        sorted_probs, order = torch.sort(probs, descending=True)
        remove = sorted_probs.cumsum(-1) - sorted_probs >= top_p
        kept = sorted_probs.masked_fill(remove, 0.0)
        truncated = torch.zeros_like(probs).scatter(-1, order, kept)
        return truncated / truncated.sum(-1, keepdim=True), (~remove).sum(-1)

    qb, out["nucleus_base"] = top_p_renormalized(lb)
    qr, out["nucleus_rl"] = top_p_renormalized(lr)
    out["js"] = js(qb, qr)
    out["js_full"] = js(pb, pr)
    out["top1_base"], out["top1_rl"] = pb.argmax(-1), pr.argmax(-1)
    out["p_top1_base"], out["p_top1_rl"] = pb.max(-1).values, pr.max(-1).values
    order_b = torch.argsort(pb, -1, descending=True)
    order_r = torch.argsort(pr, -1, descending=True)
    rank_b = torch.empty_like(order_b).scatter_(
        -1, order_b, torch.arange(pb.shape[-1], device=pb.device).expand_as(order_b)
    )
    for k in (1, 2, 3):
        out[f"rl_top{k}_rank_in_base"] = rank_b.gather(-1, order_r[:, k - 1 : k])[:, 0] + 1
    out["p_base_of_rl_top1"] = pb.gather(-1, order_r[:, :1])[:, 0]
    for k in (1, 2, 3, 4, 5, 10, 20, 50):
        hits = torch.isin
        out[f"overlap_{k}"] = torch.stack(
            [hits(order_b[t, :k], order_r[t, :k]).sum() / k for t in range(pb.shape[0])]
        )
    return out


# ---------------------------------------------------------------- children


def padded_forwards(frame, base, rl, vocab: int, masked: bool) -> dict:
    """Two bare decoder forwards (no output head, no statistics) over the engine's own padded
    batches of `frame`, with or without a padding mask; at once where the models sit on
    separate GPUs, as the engine runs them."""
    import torch

    from divscope.models.placement import on_separate_gpus
    from divscope.models.threads import concurrently
    from divscope.scoring import ScoreConfig, StatsConfig
    from divscope.scoring.engine import _pack, planned

    config = planned(ScoreConfig(StatsConfig(top_p=TOP_P)), frame, base, rl, vocab, progress=False)
    prompts, responses = frame["prompt_ids"].to_pylist(), frame["response_ids"].to_pylist()
    inputs = [p + r[:-1] for p, r in zip(prompts, responses, strict=True)]
    batches = _pack([len(x) for x in inputs], config.batch_tokens)

    def forward(model, batch: list[int]) -> None:
        rows = [inputs[i] for i in batch]
        width = max(len(x) for x in rows)
        device = model.get_input_embeddings().weight.device
        ids = torch.zeros(len(rows), width, dtype=torch.int64)
        mask = torch.zeros_like(ids)
        for i, x in enumerate(rows):
            ids[i, : len(x)], mask[i, : len(x)] = torch.tensor(x), 1
        with torch.inference_mode():
            model.get_decoder()(input_ids=ids.to(device), use_cache=False,
                                attention_mask=mask.to(device) if masked else None)  # fmt: skip

    at_once = on_separate_gpus(base, rl)
    for batch in batches:
        calls = [lambda m=model, b=batch: forward(m, b) for model in (base, rl)]
        if at_once:
            concurrently(calls)
        else:
            for call in calls:
                call()
    padded = sum(len(b) * max(len(inputs[i]) for i in b) for b in batches)
    return {"batches": len(batches), "padded_share": 1 - sum(map(len, inputs)) / padded}


def child(mode: str, root: Path, length: int, responses: int, out: Path, device: str,
          rl_device: str, ragged: bool) -> None:  # fmt: skip
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    frame = trajectory(length, VOCAB, responses, ragged)
    if mode in ("padded", "masked"):
        from divscope.models.loading import load_model

        base = load_model(str(root / "base"), dtype="float32", device=device)
        rl = load_model(str(root / "rl"), dtype="float32", device=rl_device)
        start = time.perf_counter()
        extra = padded_forwards(frame, base, rl, VOCAB, masked=mode == "masked")
    elif mode == "engine":
        from divscope.models.loading import load_model
        from divscope.models.tokenizers import load_tokenizer
        from divscope.scoring import ScoreConfig, StatsConfig, score_trajectories
        from divscope.tables import TokenTableWriter

        base = load_model(str(root / "base"), dtype="float32", device=device)
        rl = load_model(str(root / "rl"), dtype="float32", device=rl_device)
        tokenizer = load_tokenizer(str(root / "base"))
        start = time.perf_counter()
        with TokenTableWriter(out, {"bench": True}, overwrite=True) as writer:
            summary = score_trajectories(
                frame, base, rl, tokenizer, ScoreConfig(StatsConfig(top_p=TOP_P)), sink=writer.write
            )
        extra = {"fallback_rows": summary.fallback_rows, "tokens": summary.tokens}
    else:
        load = dict(dtype=torch.float32)
        base = AutoModelForCausalLM.from_pretrained(root / "base", **load).to(device).eval()
        rl = AutoModelForCausalLM.from_pretrained(root / "rl", **load).to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(root / "base")
        vocab = len(tokenizer)
        rows = []
        start = time.perf_counter()
        with torch.no_grad():
            for traj in frame.to_pylist():
                ids = torch.tensor([traj["prompt_ids"] + traj["response_ids"]], device=device)
                logits_b = base(ids).logits[0]  # [P+T, V_head]
                logits_r = rl(ids).logits[0]
                if mode == "forward":
                    continue
                first, n = len(traj["prompt_ids"]) - 1, len(traj["response_ids"])
                lb = logits_b[first : first + n, :vocab].float()
                lr = logits_r[first : first + n, :vocab].float()
                tokens = torch.tensor(traj["response_ids"], device=device)
                stats = naive_stats(lb, lr, tokens, TOP_P)
                table = {k: v.cpu().numpy() for k, v in stats.items()}
                table.update(position=list(range(n)), token_id=traj["response_ids"])
                table.update(prompt_id=[traj["prompt_id"]] * n, sample_id=[traj["sample_id"]] * n)
                rows.append(pa.table(table))
        if rows:
            pq.write_table(pa.concat_tables(rows), out)
        extra = {}
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        extra["gpu_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
        if rl_device != device:
            torch.cuda.synchronize(rl_device)
    extra["compute_s"] = time.perf_counter() - start  # scoring only: no start-up, no loading
    print(json.dumps(extra))


# ---------------------------------------------------------------- parent


def run_child(
    mode: str, root: Path, length: int, responses: int, out: Path, threads: int, device: str,
    rl_device: str, ragged: bool,
) -> dict:  # fmt: skip
    command = [sys.executable, __file__, "--child", mode, "--root", str(root)]
    command += ["--length", str(length), "--responses", str(responses), "--out", str(out)]
    command += ["--device", device, "--rl-device", rl_device] + (["--ragged"] if ragged else [])
    env = os.environ | {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    log = out.with_suffix(".stderr")  # a file, not a pipe: a full pipe would block the child
    with log.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    stdout = process.stdout.read().decode() if process.stdout else ""
    if status != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise SystemExit(f"{mode} at {length} tokens failed (status {status}): {stdout}\n{tail}")
    peak_mib = usage.ru_maxrss / 1024  # Linux reports KiB
    return {"seconds": seconds, "peak_mib": peak_mib, **json.loads(stdout.strip().splitlines()[-1])}


def _sorted(path: Path) -> dict:
    """A bench table's columns as numpy arrays, its rows by (sample_id, position)."""
    import pyarrow.parquet as pq

    order = [("sample_id", "ascending"), ("position", "ascending")]
    table = pq.read_table(path).sort_by(order)
    return {name: table[name].to_numpy() for name in table.column_names}


def agreement(engine_path: Path, naive_path: Path) -> str:
    import numpy as np

    engine, naive = _sorted(engine_path), _sorted(naive_path)
    worst = {
        c: float(np.abs(engine[c].astype(np.float64) - naive[c].astype(np.float64)).max())
        for c in ("logp_base", "entropy_base", "js_full", "kl_base_rl", "ce_base_rl", "js")
    }
    same = {c: float((engine[c] == naive[c]).mean()) for c in ("top1_base", "nucleus_base")}
    return (
        "engine vs naive: max |Δ| "
        + ", ".join(f"{c} {v:.1e}" for c, v in worst.items())
        + "; equal "
        + ", ".join(f"{c} {v:.1%}" for c, v in same.items())
    )


def distributions(path: Path, results: dict) -> str:
    """What the bench's distributions look like (a trained model's are usually more peaked)."""
    import numpy as np

    table = _sorted(path)
    entropy, nucleus = table["entropy_base"], table["nucleus_base"]
    fallback = sum(r.get("fallback_rows", 0) for r in results.values())
    tokens = sum(r.get("tokens", 0) for r in results.values())
    return (
        f"distributions: median entropy {np.median(entropy):.2f} nats, median "
        f"nucleus {np.median(nucleus):.0f} tokens (max {nucleus.max()}), "
        f"full-sort fallback rows {fallback} of {tokens} engine tokens"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--naive-lengths", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--logit-scale", type=float, default=30.0)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads per child (default 1: stable on a shared machine, fair to both)",
    )
    parser.add_argument(
        "--responses",
        type=int,
        default=1,
        help="responses of each length scored per process (start-up is paid once per process)",
    )
    parser.add_argument(
        "--device", default="cpu", help="cpu or cuda[:N]: where every child runs its models"
    )
    parser.add_argument(
        "--rl-device", help="where the RL model runs (default: --device), e.g. cuda:1"
    )
    parser.add_argument(
        "--ragged",
        action="store_true",
        help="responses of length/4 to length tokens: the engine against two bare decoder "
        "forwards over its own padded batches, without (padded) and with (masked) a mask",
    )
    parser.add_argument("--child", choices=["engine", "naive", "forward", "padded", "masked"])
    parser.add_argument("--root", type=Path)
    parser.add_argument("--length", type=int)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rl_device = args.rl_device or args.device
    if args.child:
        child(args.child, args.root, args.length, args.responses, args.out, args.device,
              rl_device, args.ragged)  # fmt: skip
        return
    if args.ragged:
        ragged(args, rl_device)
        return

    with tempfile.TemporaryDirectory(prefix="divscope-bench-") as tmp:
        root = Path(tmp)
        build_pair(root, VOCAB, args.logit_scale)
        print(
            f"tiny Qwen2 pair (hidden 64, 2 layers), vocabulary {VOCAB:,}, prompt {PROMPT}, "
            f"top-p {TOP_P}, {args.device}, {args.threads} thread(s) per process, {args.responses} "
            "response(s) of each length per process"
        )
        results: dict[tuple[str, int], dict] = {}
        for length in args.lengths:
            modes = ["forward", "engine"] + (["naive"] if length in args.naive_lengths else [])
            for mode in modes:
                out = root / f"{mode}-{length}.parquet"
                results[mode, length] = run_child(
                    mode, root, length, args.responses, out, args.threads, args.device,
                    rl_device, ragged=False,
                )  # fmt: skip
                print(f"  {mode:>7} {length:>5} tokens: {results[mode, length]}", flush=True)
        header = (
            f"{'tokens':>6} | {'naive s':>8} {'engine s':>8} {'forward s':>9} | "
            f"{'speed-up':>8} {'eng/fwd':>7} | {'naive MiB':>9} {'engine MiB':>10} "
            f"{'mem ratio':>9} | ms/token naive, engine, forward (compute only)"
        )
        print("\n" + header + "\n" + "-" * len(header))
        for length in args.lengths:
            tokens = length * args.responses
            engine, forward = results["engine", length], results["forward", length]
            naive = results.get(("naive", length))
            cells = ["-"] * 5
            if naive:
                cells = [
                    f"{naive['seconds']:.1f}",
                    f"{naive['seconds'] / engine['seconds']:.1f}x",
                    f"{naive['peak_mib']:.0f}",
                    f"{engine['peak_mib'] / naive['peak_mib']:.3f}",
                    f"{1000 * naive['compute_s'] / tokens:.1f}",
                ]
            print(
                f"{length:>6} | {cells[0]:>8} {engine['seconds']:>8.1f} "
                f"{forward['seconds']:>9.1f} | "
                f"{cells[1]:>8} {engine['seconds'] / forward['seconds']:>6.2f}x | "
                f"{cells[2]:>9} {engine['peak_mib']:>10.0f} {cells[3]:>9} | "
                f"{cells[4]}, {1000 * engine['compute_s'] / tokens:.1f}, "
                f"{1000 * forward['compute_s'] / tokens:.1f}"
            )
        if {("engine", 1024), ("engine", 4096)} <= results.keys():
            growth = results["engine", 4096]["peak_mib"] - results["engine", 1024]["peak_mib"]
            print(f"engine peak at 4096 tokens minus at 1024: {growth:.0f} MiB (target <= 512)")
        skipped = [n for n in args.lengths if n not in args.naive_lengths]
        if skipped:
            print(f"naive not run at {skipped} tokens: it needs ~12 GB per 1,024 tokens.")
        for length in args.naive_lengths:
            if ("naive", length) in results:
                engine_path, naive_path = (
                    root / f"{m}-{length}.parquet" for m in ("engine", "naive")
                )
                print(f"{length} tokens: " + agreement(engine_path, naive_path))
        print(distributions(root / f"engine-{max(args.lengths)}.parquet", results))


def ragged(args, rl_device: str) -> None:
    """`--ragged`: the engine against two bare decoder forwards over its padded batches."""
    with tempfile.TemporaryDirectory(prefix="divscope-bench-") as tmp:
        root = Path(tmp)
        build_pair(root, VOCAB, args.logit_scale)
        print(
            f"tiny Qwen2 pair (hidden 64, 2 layers), vocabulary {VOCAB:,}, prompt {PROMPT}, "
            f"base on {args.device}, rl on {rl_device}, {args.responses} responses of length/4 "
            "to length tokens per process; compute seconds (no start-up, no loading)"
        )
        header = (
            f"{'tokens':>6} | {'batches':>7} {'padding':>7} | {'engine s':>8} {'padded s':>8} "
            f"{'masked s':>8} | {'eng/padded':>10} {'masked/padded':>13}"
        )
        print(header + "\n" + "-" * len(header))
        for length in args.lengths:
            runs = {
                mode: run_child(
                    mode,
                    root,
                    length,
                    args.responses,
                    root / f"{mode}-{length}.parquet",
                    args.threads,
                    args.device,
                    rl_device,
                    ragged=True,
                )  # fmt: skip
                for mode in ("padded", "masked", "engine")
            }
            seconds = {mode: run["compute_s"] for mode, run in runs.items()}
            print(
                f"{length:>6} | {runs['padded']['batches']:>7} "
                f"{runs['padded']['padded_share']:>7.1%} | {seconds['engine']:>8.2f} "
                f"{seconds['padded']:>8.2f} {seconds['masked']:>8.2f} | "
                f"{seconds['engine'] / seconds['padded']:>9.2f}x "
                f"{seconds['masked'] / seconds['padded']:>12.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
