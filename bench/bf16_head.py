"""Benchmark: the statistics of two bf16 models that differ by small logits, against float64.

    python bench/bf16_head.py                  # the Markdown table (about a minute, CPU)
    python bench/bf16_head.py --sigma 0.02 --sequences 8

Two bf16 models share every weight but the output head: the RL one's head is the base one's plus
Gaussian noise, rounded to bf16, scaled so that the true logit differences (float64 products of
the bf16 weights and hidden states) have standard deviation `--sigma` (0.01: the size of most of
RL's edits). Both models' final hidden states (bf16, identical) of `--sequences` sequences go
through the output head three ways:

- float64: `hidden.double() @ weight.double().T`, the reference;
- before: the bf16 matrix product, then upcast (what divscope did before issue 26, and what
  `model(...).logits.float()` gives);
- after: `OutputHead` (`float32_logits`): the same bf16 operands, accumulated in float32.

`js` (top-p 0.95, T=1, the engine's column) and `js_full` are computed from each by the
engine's `pair_stats` (float32), and from the float64 logits by the float64 reference of the
tests (`tests/scoring/reference.py`). Two pairs: the lab's trained base (`fixtures/lab/base`,
peaked distributions) on the lab's trajectories, and tiny random Llama models
(`tests/tinymodels.make_model`, vocabulary 1,024) whose logits spread like a chat model's, on
random token sequences. One torch thread.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository root: divscope and the tests' helpers
from divscope.models.head import OutputHead  # noqa: E402
from divscope.scoring.metrics import StatsConfig, pair_stats  # noqa: E402
from tests.scoring.reference import head_twin, reference_row, response_hidden  # noqa: E402
from tests.tinymodels import make_model  # noqa: E402

STATS = StatsConfig()
BELOW = 1e-3


def lab_pair(sigma: float, sequences: int):
    """The lab's base in bf16 and its head twin, with the hidden states of its trajectories."""
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(ROOT / "fixtures/lab/base", dtype=torch.float32)
    base = base.eval().to(torch.bfloat16)
    with open(ROOT / "fixtures/lab/trajectories.jsonl", encoding="utf-8") as lines:
        rows = [json.loads(line) for line, _ in zip(lines, range(sequences), strict=False)]
    pairs = [(row["prompt_ids"], row["response_ids"]) for row in rows]
    return base, pairs, len(base.get_output_embeddings().weight)


def random_pair(scale: float, sequences: int, vocab: int = 1024):
    """A tiny random Llama in bf16 (head scaled by `scale`) and random 16 + 48-token sequences."""
    base = make_model("llama", vocab_size=vocab, logit_scale=scale, max_positions=256)
    generator = torch.Generator().manual_seed(0)
    pairs = []
    for _ in range(sequences):
        ids = torch.randint(0, vocab, (64,), generator=generator).tolist()
        pairs.append((ids[:16], ids[16:]))
    return base.to(torch.bfloat16), pairs, vocab


def measure(base, pairs, vocab: int, sigma: float) -> dict[str, float]:
    """Share of js < 1e-3 and median js (and js_full) of float64, before and after."""
    hidden = torch.cat([response_hidden(base, p, r) for p, r in pairs])  # [n, d] bf16
    tokens = torch.tensor([t for _, r in pairs for t in r])
    rl = head_twin(base, hidden, sigma)
    weights = [m.get_output_embeddings().weight.detach()[:vocab] for m in (base, rl)]
    exact = [hidden.double() @ w.double().T for w in weights]  # [n, V] each
    logits = {
        "before": [torch.nn.functional.linear(hidden, w).float() for w in weights],
        "after": [OutputHead(m, vocab)(hidden) for m in (base, rl)],
    }
    want = [
        reference_row(b.numpy(), r.numpy(), int(t), STATS.top_p, STATS.temperature)[0]
        for b, r, t in zip(*exact, tokens, strict=True)
    ]
    result: dict[str, float] = {"rows": len(want), "logit_std": exact[0].std().item()}
    result["logit_max"] = exact[0].abs().max().item()
    for column in ("js", "js_full"):
        reference = np.array([row[column] for row in want])
        result[f"{column} float64 share"] = float((reference < BELOW).mean())
        result[f"{column} float64 median"] = float(np.median(reference))
        for name, (b, r) in logits.items():
            got = getattr(pair_stats(b, r, tokens, STATS), column).double().numpy()
            result[f"{column} {name} share"] = float((got < BELOW).mean())
            result[f"{column} {name} median"] = float(np.median(got))
            result[f"{column} {name} error"] = float(np.abs(got - reference).max())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sigma", type=float, default=0.01, help="true logit differences' std")
    parser.add_argument("--sequences", type=int, default=16, help="sequences per pair")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    pairs = {
        "lab base (trained, V 504)": lab_pair(args.sigma, args.sequences),
        "random Llama, head x30 (V 1,024)": random_pair(30.0, args.sequences),
        "random Llama, head x100 (V 1,024)": random_pair(100.0, args.sequences),
    }
    print(
        f"True logit differences σ = {args.sigma:g}; share of tokens with {{js}} < {BELOW:g} and "
        "median {js}: float64 / before (bf16 product, upcast) / after (float32 accumulation); "
        "largest |error| against float64 before / after.\n"
    )
    print("| pair | rows | logits: std, max | column | share < 1e-3 | median | max error |")
    print("|---|---|---|---|---|---|---|")
    for name, (base, sequences, vocab) in pairs.items():
        r = measure(base, sequences, vocab, args.sigma)
        for column in ("js", "js_full"):
            share = " / ".join(
                f"{r[f'{column} {k} share']:.3f}" for k in ("float64", "before", "after")
            )
            median = " / ".join(
                f"{r[f'{column} {k} median']:.2g}" for k in ("float64", "before", "after")
            )
            error = f"{r[f'{column} before error']:.2g} / {r[f'{column} after error']:.2g}"
            print(
                f"| {name} | {r['rows']:,} | {r['logit_std']:.1f}, {r['logit_max']:.1f} | "
                f"`{column}` | {share} | {median} | {error} |"
            )


if __name__ == "__main__":
    main()
