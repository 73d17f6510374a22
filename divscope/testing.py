"""Seeded synthetic token tables and cross-sample results: the one builder of the tests and of
the benchmarks in bench/."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from divscope.schema import CROSS_SAMPLE, OVERLAP_KS, TOKEN_TABLE

WORDS = [" wait", " so", " the", " let", " we", " check", "\n", " x", " =", " 2", " but", " is"]


def token_rows(
    lengths: np.ndarray,
    rng: np.random.Generator,
    *,
    n_samples: int,
    first: int = 0,
    words: Sequence[str] = WORDS,
    scale: float = 1.0,
) -> pl.DataFrame:
    """Token rows (every contract column) of the responses `first`, `first` + 1, ... with the
    given `lengths`; response r is sample r % n_samples of prompt `p{r // n_samples}`.

    The divergence is sparse and early-heavy: most tokens near zero (5% exactly zero), a heavy
    tail up to ln 2; `scale` multiplies it. Entropies, KL, CE and overlaps move with it; token
    ids, top-1 ids and nucleus sizes lie within the vocabulary `words`.
    """
    n = int(lengths.sum())
    vocab = len(words)
    response = np.repeat(np.arange(first, first + lengths.size), lengths)
    n_tokens = np.repeat(lengths, lengths)
    position = np.arange(n) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    divergent = rng.random(n) < 0.2 * (1.5 - position / n_tokens)
    js = np.where(divergent, rng.lognormal(-2.5, 1.2, n), rng.lognormal(-11, 2, n)) * scale
    js = np.minimum(js, np.log(2))
    js[rng.random(n) < 0.05] = 0.0
    ranks = rng.geometric(0.5, (3, n))
    correct = rng.random(lengths.size) < 0.5
    columns = {
        "prompt_id": np.char.add("p", (response // n_samples).astype(str)),
        "sample_id": response % n_samples,
        "position": position,
        "n_tokens": n_tokens,
        "rel_position": position / n_tokens,
        "token_id": rng.integers(0, vocab, n),
        "logp_base": -rng.exponential(1.0, n),
        "logp_rl": -rng.exponential(1.0, n),
        "entropy_base": rng.exponential(0.5, n) + 3 * js,
        "entropy_rl": rng.exponential(0.4, n) + js,
        "js": js,
        "js_full": js * 1.1,
        "kl_base_rl": js * 4,
        "kl_rl_base": js * 3,
        "ce_base_rl": js * 5 + rng.exponential(0.3, n),
        "top1_base": rng.integers(0, vocab, n),
        "top1_rl": rng.integers(0, vocab, n),
        "rl_top1_rank_in_base": ranks[0],
        "rl_top2_rank_in_base": ranks[1],
        "rl_top3_rank_in_base": ranks[2],
        "p_base_of_rl_top1": rng.beta(0.4, 2.0, n),
        "p_top1_base": rng.uniform(0.2, 1.0, n),
        "p_top1_rl": rng.uniform(0.2, 1.0, n),
        **{f"overlap_{k}": np.clip(1 - js * rng.random(n) * 3, 0, 1) for k in OVERLAP_KS},
        "nucleus_base": rng.integers(1, vocab, n),
        "nucleus_rl": rng.integers(1, vocab, n),
        "correct": np.repeat(correct, lengths),
    }
    frame = pl.DataFrame(columns).with_columns(
        pl.col("token_id").replace_strict(range(vocab), list(words)).alias("token")
    )
    return frame.select(pl.col(name).cast(dtype) for name, dtype in TOKEN_TABLE.items())


def synthetic_tokens(
    n_prompts: int = 8,
    n_samples: int = 4,
    length: int = 60,
    *,
    min_length: int | None = None,
    scale: float = 1.0,
    seed: int = 0,
) -> pl.DataFrame:
    """A token table of `n_prompts` × `n_samples` responses of `min_length` (default
    `length // 2`) to `length` tokens: the rows of `token_rows`."""
    rng = np.random.default_rng(seed)
    low = length // 2 if min_length is None else min_length
    lengths = rng.integers(low, length + 1, n_prompts * n_samples)
    return token_rows(lengths, rng, n_samples=n_samples, scale=scale)


def synthetic_results(n_prompts: int = 12, n_samples: int = 8, seed: int = 0) -> pl.DataFrame:
    """Cross-sample results: controls, forward/reverse/random over budgets, gated over eps."""
    rng = np.random.default_rng(seed)
    budgets = [0, 1, 2, 4, 8, -1]
    settings = [("base", -1, None, 0.3, 0.0), ("rl", -1, None, 0.7, 0.0)]
    for i, budget in enumerate(budgets):
        gain = 1 - 0.5 ** (i + 1)
        share = 0.002 * 2**i
        settings += [
            ("forward", budget, 0.05, 0.3 + 0.38 * gain, share),
            ("reverse", budget, 0.05, 0.7 - 0.35 * gain, share),
            ("random", budget, None, 0.3 + 0.05 * gain, share),
        ]
    for i, eps in enumerate([4.0, 3.0, 2.0, 1.5, 1.0, 0.5]):
        settings.append(("gated", -1, eps, 0.3 + 0.4 * (1 - 0.4 ** (i + 1)), 0.001 * 2**i))
    rows = []
    for policy, budget, eps, accuracy, share in settings:
        for p in range(n_prompts):
            difficulty = (p - n_prompts / 2) * 0.04
            for s in range(n_samples):
                n_tokens = int(rng.integers(50, 150))
                switches = int(rng.binomial(n_tokens, share))
                rows.append(
                    {
                        "prompt_id": f"p{p}",
                        "sample_id": s,
                        "policy": policy,
                        "budget": budget,
                        "eps": eps,
                        "seed": 0,
                        "n_tokens": n_tokens,
                        "n_switches": switches,
                        "n_effective_coupled": switches // 2,
                        "finished": True,
                        "correct": bool(rng.random() < accuracy - difficulty),
                    }
                )
    return with_switches(pl.DataFrame(rows, infer_schema_length=None), seed=seed)


def with_switches(results: pl.DataFrame, *, seed: int = 0) -> pl.DataFrame:
    """`results` with the switch columns of the contract, consistent with `n_switches` and
    `n_effective_coupled`: token ids over `WORDS`, switch positions, the primary model's coupled
    draw (different from the emitted token at the first `n_effective_coupled` switches) and both
    tokens' text; `n_effective`, an independent draw differing at those and at half of the
    other switches; and a `delta_cosine` per token. Its own generators leave the other columns
    as they were."""
    rng = np.random.default_rng([seed, 1])
    columns: dict[str, list] = {
        name: []
        for name in (
            "response_ids", "switch_positions", "switch_primary_ids", "switch_primary_tokens",
            "switch_tokens", "n_effective",
        )
    }  # fmt: skip
    for n_tokens, switches, effective in results.select(
        "n_tokens", "n_switches", "n_effective_coupled"
    ).iter_rows():
        ids = rng.integers(0, len(WORDS), n_tokens)
        positions = np.sort(rng.choice(n_tokens, switches, replace=False))
        primary = ids[positions].copy()
        primary[:effective] = (primary[:effective] + 1 + rng.integers(0, 3, effective)) % len(WORDS)
        columns["response_ids"].append(ids.tolist())
        columns["switch_positions"].append(positions.tolist())
        columns["switch_primary_ids"].append(primary.tolist())
        columns["switch_primary_tokens"].append([WORDS[i] for i in primary])
        columns["switch_tokens"].append([WORDS[i] for i in ids[positions]])
        columns["n_effective"].append(effective + (switches - effective) // 2)
    # A delta cosine per token (as `--delta-alignment` records), higher along RL-led policies,
    # from a generator of its own so that the columns above stay as they were.
    cosines = np.random.default_rng([seed, 2])
    columns["delta_cosine"] = [
        np.clip(cosines.normal(0.3 + 0.3 * (policy != "base"), 0.2, n_tokens), -1, 1).tolist()
        for policy, n_tokens in results.select("policy", "n_tokens").iter_rows()
    ]
    return results.with_columns(
        pl.Series(name, values, dtype=CROSS_SAMPLE[name]) for name, values in columns.items()
    )
