"""What the switches of cross-sampling are: how many change the token (per threshold, with the
recovery of each point), which tokens they swap, how many are planning words, and how often a
switch position still diverges on the cross-sampled path (`map_agreement`).

Input: cross-sample results (docs/contracts.md, "Cross-sample results"). At each switch position
the results hold the token the primary model drew with the step's coupled uniform
(`switch_primary_ids`, `switch_primary_tokens`) beside the emitted token (`switch_tokens`;
its id is `response_ids[position]`); `n_effective_coupled` counts the switches where the two
differ. A switch is *effective* when its emitted token differs from an independent draw of the
primary model (`n_effective`), as the core paper's Table 1 counts them; the independent draw is
not kept per switch, so the token pairs (`switch_pairs`) are those of the coupled draw.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl
import polars.selectors as cs

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses.controls import Settings, benchmark_codes
from divscope.analyses.cross_sample import Reference, cross_sampling_curve
from divscope.analyses.tokens import PLANNING_WORDS, lexicon_words, word_counts
from divscope.estimators import PairedBootstrap, interval_columns
from divscope.schema import SETTING_COLUMNS

PAIR_COLUMNS: tuple[str, ...] = (
    "response_ids", "switch_positions", "switch_primary_ids", "switch_primary_tokens",
    "switch_tokens",
)  # fmt: skip


def threshold_sensitivity(results: Frame) -> pl.DataFrame:
    """The core paper's threshold sweep: switches and effective switches per JS threshold.

    One row per setting with an `eps` (the `forward`/`reverse` runs of `--eps 0.01,0.05,...`),
    over all its responses (ungraded ones included; accuracy over the graded ones).

    Args:
        results: cross-sample results with `prompt_id`, `policy`, `budget`, `eps`, `n_tokens`,
            `n_switches`, `n_effective`, and optionally `n_effective_coupled`, `correct`.

    Returns:
        The setting columns (`policy`, `budget`, `eps`, ...), `n_responses`, `accuracy`
        (mean@n; null when ungraded), `switches` (Σ n_switches), `effective` (Σ n_effective,
        against an independent draw of the primary: the papers' count), `effective_coupled`
        (Σ n_effective_coupled, against the primary's coupled draw; null when absent),
        `effective_ratio` and `effective_coupled_ratio` (effective / switches), per-response
        means `switches_per_response`, `effective_per_response`,
        `effective_coupled_per_response`, `tokens_per_response`, and `effective_token_share`,
        `effective_coupled_token_share` (effective per response over the mean response
        length: the paper's "3.86% effective tokens = 38 effective of 75 events"). Sorted by
        policy, setting and eps.

    >>> results = pl.DataFrame({"prompt_id": ["a", "b"], "policy": ["forward"] * 2,
    ...     "budget": [-1, -1], "eps": [0.05, 0.05], "n_tokens": [100, 300],
    ...     "n_switches": [10, 30], "n_effective": [4, 8], "correct": [True, False]})
    >>> threshold_sensitivity(results).select("effective_ratio", "effective_token_share").row(0)
    (0.3, 0.03)
    """
    lazy = checked_lazy(
        results, ["eps"], what="threshold_sensitivity", source="cross-sample results"
    )
    settings = Settings(
        lazy.filter(pl.col("eps").is_not_null()),
        what="threshold_sensitivity",
        required=("eps", "n_tokens", "n_switches", "n_effective"),
        optional=("n_effective_coupled",),
        graded=False,
    )
    frame = settings.frame
    if "correct" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, pl.Boolean).alias("correct"))
    coupled = (
        pl.col("n_effective_coupled")
        if "n_effective_coupled" in frame.columns
        else pl.lit(None, pl.Int64)
    )
    accuracy = (
        frame.drop_nulls("correct")
        .group_by(*settings.keys, "prompt_id")
        .agg(pl.col("correct").mean())
        .group_by(settings.keys)
        .agg(pl.col("correct").mean().alias("accuracy"))
    )
    counts = frame.group_by(settings.keys).agg(
        pl.len().alias("n_responses"),
        pl.col("n_switches").sum().alias("switches"),
        pl.col("n_effective").sum().alias("effective"),
        coupled.sum().alias("effective_coupled"),
        coupled.is_not_null().all().alias("_complete"),
        pl.col("n_tokens").sum().alias("_tokens"),
    )
    per_response = pl.col("n_responses").cast(pl.Float64)
    table = counts.join(accuracy, on=settings.keys, how="left", nulls_equal=True).with_columns(
        pl.when(pl.col("_complete")).then("effective_coupled").alias("effective_coupled")
    )
    table = table.with_columns(
        (pl.col("effective") / pl.col("switches")).alias("effective_ratio"),
        (pl.col("effective_coupled") / pl.col("switches")).alias("effective_coupled_ratio"),
        (pl.col("switches") / per_response).alias("switches_per_response"),
        (pl.col("effective") / per_response).alias("effective_per_response"),
        (pl.col("effective_coupled") / per_response).alias("effective_coupled_per_response"),
        (pl.col("_tokens") / per_response).alias("tokens_per_response"),
        (pl.col("effective") / pl.col("_tokens")).alias("effective_token_share"),
        (pl.col("effective_coupled") / pl.col("_tokens")).alias("effective_coupled_token_share"),
    ).with_columns(cs.float().fill_nan(None))
    return table.select(
        *settings.keys,
        "n_responses",
        "accuracy",
        "switches",
        "effective",
        "effective_coupled",
        "effective_ratio",
        "effective_coupled_ratio",
        "switches_per_response",
        "effective_per_response",
        "effective_coupled_per_response",
        "tokens_per_response",
        "effective_token_share",
        "effective_coupled_token_share",
    ).sort("policy", *settings.settings, "budget", nulls_last=True)


def threshold_curves(
    results: Frame,
    *,
    reference: Reference = None,
    recovery_at: int | None = None,
    base_policy: str = "base",
    rl_policy: str = "rl",
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Recovery against budget, one curve per eps, and each point's effective/total ratio.

    `threshold_sensitivity` joined with the accuracy and recovery intervals of
    `cross_sampling_curve` (on all of `results`, so its intervals are those of the curve):
    the settings with an `eps` (`--eps 0.01,0.05,0.1,0.2` gives forward and reverse one
    setting per eps and budget), with both counts of effective switches (against an
    independent draw of the primary, `n_effective`, and against its coupled draw,
    `n_effective_coupled`).

    Args:
        results: graded cross-sample results with the controls (as `cross_sampling_curve`)
            and settings with an `eps`.
        reference: the recovery's upper bound, as in `cross_sampling_curve`.
        recovery_at: None for recovery on mean@n, or the k of pass@k.
        base_policy: the base-model control.
        rl_policy: the RL-model control.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        The columns of `threshold_sensitivity`, then `n_prompts`, `accuracy_low`,
        `accuracy_high`, `recovery`, `recovery_low`, `recovery_high` (null without controls);
        sorted by policy, eps (and the other setting columns) and budget: each eps's curve
        over the budgets.

    Raises:
        DivscopeError: what `cross_sampling_curve` raises.

    >>> results = pl.DataFrame({"prompt_id": ["a", "b"] * 4,
    ...     "policy": ["base"] * 2 + ["rl"] * 2 + ["forward"] * 4,
    ...     "budget": [-1] * 4 + [1, 1, 2, 2], "eps": [None] * 4 + [0.05] * 4,
    ...     "correct": [False, False, True, True, True, False, True, True],
    ...     "n_tokens": [10] * 8, "n_switches": [0] * 4 + [1, 1, 2, 2],
    ...     "n_effective": [0] * 4 + [1, 0, 1, 1]})
    >>> threshold_curves(results, n_boot=20).select("budget", "recovery", "effective_ratio").rows()
    [(1, 0.5, 0.5), (2, 1.0, 0.5)]
    """
    sensitivity = threshold_sensitivity(results)
    curve = cross_sampling_curve(
        results,
        reference=reference,
        recovery_at=recovery_at,
        base_policy=base_policy,
        rl_policy=rl_policy,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    keys = [c for c in sensitivity.columns if c in ("policy", "budget", *SETTING_COLUMNS)]
    measures = ["n_prompts", "accuracy_low", "accuracy_high"]
    measures += ["recovery", "recovery_low", "recovery_high"]
    return sensitivity.join(
        curve.select(*keys, *measures), on=keys, how="left", nulls_equal=True
    ).sort("policy", *keys[2:], "budget", nulls_last=True, maintain_order=True)


def map_agreement(
    results: Frame, *, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
) -> pl.DataFrame:
    """How often the switch positions still diverge on the cross-sampled path.

    `switch_js` holds, at each switch position of a response, the online JS between the base
    and RL models (top-p truncated, as the online rule computes it) on the response's own
    prefix. Per setting with an `eps`, the agreement is the share of its switch positions with
    `switch_js` > eps (compared in float32, as the decoder compares), pooled over its
    responses (Σ above / Σ switches). Online `forward` and
    `reverse` switch only there, so their agreement is 1; a retrospective map (positions
    precomputed on reference trajectories) intervenes where the reference diverged, and its
    agreement says how often the mixed prefix still diverges there; an `entropy-matched`
    stratum switches at low divergence by design. Rows whose `switch_js` is null (policies
    without JS) are left out; responses without a switch count in `n_responses` only.

    The intervals resample prompts (within each benchmark when there are several), one set of
    weights for every setting, so two settings' agreements are paired.

    Args:
        results: cross-sample results with `prompt_id`, `policy`, `budget`, `eps`,
            `switch_js`.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        One row per setting (its key columns, as `cross_sampling_curve`): `n_prompts`,
        `n_responses`, `n_switches`, `n_above` (switches with switch_js > eps), `agreement`
        (n_above / n_switches; null without a switch), `agreement_low`, `agreement_high`.
        Sorted by policy, the setting columns and budget.

    >>> results = pl.DataFrame({"prompt_id": ["a", "b", "a"], "policy": ["forward"] * 3,
    ...     "budget": [-1] * 3, "eps": [0.05] * 3, "map": ["retrospective"] * 3,
    ...     "switch_js": [[0.2, 0.01], [0.3], None]})
    >>> map_agreement(results, n_boot=20).select("n_switches", "n_above", "agreement").row(0)
    (3, 2, 0.6666666666666666)
    """
    settings = Settings(
        results,
        what="map_agreement",
        required=("eps", "switch_js"),
        graded=False,
        controls=(),
    )
    frame = settings.frame.filter(pl.col("eps").is_not_null() & pl.col("switch_js").is_not_null())
    prompts = settings.prompts()
    index = {p: i for i, p in enumerate(prompts)}
    codes = benchmark_codes(prompts, settings.benchmarks())
    bootstrap = PairedBootstrap.drawn(codes, n_boot=n_boot, seed=seed)
    rows = []
    for setting in settings.cells(frame):
        responses = frame.filter(setting.expression())
        switches = (
            responses.select("prompt_id", "eps", pl.col("switch_js").alias("js"))
            .explode("js")
            .drop_nulls("js")
        )
        per_prompt = switches.group_by("prompt_id").agg(
            pl.len().alias("n"),
            # In float32, as the decoder compares its float32 JS with eps.
            (pl.col("js").cast(pl.Float32) > pl.col("eps").cast(pl.Float32)).sum().alias("above"),
        )
        totals, counts = np.zeros(len(prompts)), np.zeros(len(prompts))
        for prompt, n, above in per_prompt.iter_rows():
            counts[index[prompt]], totals[index[prompt]] = n, above
        agreement = bootstrap.ratio(totals, counts).interval(confidence) if counts.any() else None
        rows.append(
            {
                **dict(zip(setting.names, setting.values, strict=True)),
                "n_prompts": responses["prompt_id"].n_unique(),
                "n_responses": responses.height,
                "n_switches": int(counts.sum()),
                "n_above": int(totals.sum()),
                **interval_columns("agreement", agreement),
            }
        )
    schema = {c: settings.frame.schema[c] for c in settings.keys}
    schema |= {c: pl.Int64() for c in ("n_prompts", "n_responses", "n_switches", "n_above")}
    schema |= {f"agreement{end}": pl.Float64() for end in ("", "_low", "_high")}
    return pl.DataFrame(rows, schema=schema)


def switch_pairs(
    results: Frame,
    *,
    policy: str | None = None,
    top: int = 20,
    effective_only: bool = True,
) -> pl.DataFrame:
    """The most frequent (primary token, emitted token) pairs at switch positions (Fig. 52).

    At each switch the primary model's own draw (`switch_primary_tokens`) is replaced by the
    intervening model's token (`switch_tokens`); counting the pairs shows which decisions the
    intervention changes (e.g. " So" → " Wait").

    Args:
        results: cross-sample results with `policy`, `budget`, `response_ids`,
            `switch_positions`, `switch_primary_ids`, `switch_primary_tokens`, `switch_tokens`.
        policy: only this policy (default every policy with switches).
        top: pairs kept per setting.
        effective_only: count only the switches whose emitted token differs from the primary's
            coupled draw (by id; the independent draw of `n_effective` is not kept per switch).

    Returns:
        Per setting (its key columns, as `cross_sampling_curve`) up to `top` rows, most
        frequent first, ties by the tokens: `primary_token`, `token`, `count`, `pair_share`
        (of the setting's counted switches), `n_switches` (the setting's counted switches).

    >>> results = pl.DataFrame({"policy": ["forward"] * 2, "budget": [-1, -1],
    ...     "prompt_id": ["a", "b"], "response_ids": [[5, 7, 9], [7, 8]],
    ...     "switch_positions": [[1, 2], [0]], "switch_primary_ids": [[6, 9], [6]],
    ...     "switch_primary_tokens": [[" So", " x"], [" So"]],
    ...     "switch_tokens": [[" Wait", " x"], [" Wait"]]})
    >>> switch_pairs(results).select("primary_token", "token", "count", "pair_share").rows()
    [(' So', ' Wait', 2, 1.0)]
    """
    settings = Settings(
        results, what="switch_pairs", required=PAIR_COLUMNS, graded=False, controls=()
    )
    frame = settings.frame
    if policy is not None:
        frame = frame.filter(pl.col("policy") == policy)
    pairs = (
        frame.select(
            *settings.keys,
            pl.col("response_ids").list.gather(pl.col("switch_positions")).alias("emitted_id"),
            pl.col("switch_primary_ids").alias("primary_id"),
            pl.col("switch_primary_tokens").alias("primary_token"),
            pl.col("switch_tokens").alias("token"),
        )
        .explode("emitted_id", "primary_id", "primary_token", "token")
        .drop_nulls("token")
    )
    if effective_only:
        pairs = pairs.filter(pl.col("emitted_id") != pl.col("primary_id"))
    counts = (
        pairs.group_by(*settings.keys, "primary_token", "token")
        .agg(pl.len().alias("count"))
        .with_columns(pl.col("count").sum().over(settings.keys).alias("n_switches"))
        .with_columns((pl.col("count") / pl.col("n_switches")).alias("pair_share"))
        .sort(
            [*settings.keys, "count", "primary_token", "token"],
            descending=[*([False] * len(settings.keys)), True, False, False],
            nulls_last=True,
        )
    )
    return (
        counts.group_by(settings.keys, maintain_order=True)
        .head(top)
        .select(*settings.keys, "primary_token", "token", "count", "pair_share", "n_switches")
    )


def takeover_planning(
    results: Frame,
    tokens: Frame | None = None,
    *,
    policy: str = "gated",
    lexicon: Iterable[str] = PLANNING_WORDS,
) -> pl.DataFrame:
    """Planning words in the takeover set against all tokens (the takeover paper's 17.6×).

    The takeover set of a setting is every switch position of its responses (every step the
    gate handed to the other model, effective or not); its planning share is the share of
    their emitted tokens (`switch_tokens`) that are planning words. The global share is that of
    every row of the token table `tokens` (one per scored response token, as
    `planning_enrichment`'s `share_all`: all tokens of the scored base rollouts, whitespace
    tokens included in the count). Words are compared after `normalized_token`, as in
    `planning_enrichment`.

    Args:
        results: cross-sample results with `policy`, `budget`, `switch_tokens`.
        tokens: a token table with `token` for the global share (None: no global share).
        policy: the takeover policy.
        lexicon: the planning words (default `PLANNING_WORDS`).

    Returns:
        One row per setting of `policy` (its key columns): `n_takeovers`, `n_planning`,
        `share_takeover`, `share_global` (null without `tokens`), `enrichment` (share_takeover
        / share_global; null without a global planning word).

    >>> results = pl.DataFrame({"prompt_id": ["a"], "policy": ["gated"], "budget": [-1],
    ...     "switch_tokens": [[" Wait", " 2", " so", " x"]]})
    >>> table = pl.DataFrame({"token": [" wait", " the", " x", " y"]})
    >>> planning = takeover_planning(results, table)
    >>> planning.select("share_takeover", "share_global", "enrichment").row(0)
    (0.5, 0.25, 2.0)
    """
    settings = Settings(
        results, what="takeover_planning", required=("switch_tokens",), graded=False, controls=()
    )
    words = lexicon_words(lexicon).implode()
    is_planning = pl.col("word").is_in(words)
    share_global = None
    if tokens is not None:
        counts = word_counts(
            checked_lazy(tokens, ["token"], what="takeover_planning").select("token")
        )
        totals = counts.select(
            pl.col("count").sum().alias("all"), pl.col("count").filter(is_planning).sum()
        ).collect()
        n_all, n_planning = totals.row(0)
        share_global = n_planning / n_all if n_all else None
    rows = []
    for setting in settings.cells(settings.frame.filter(pl.col("policy") == policy)):
        switched = (
            settings.rows(setting)
            .select(pl.col("switch_tokens").alias("token"))
            .explode("token")
            .drop_nulls()
        )
        counts = word_counts(switched.lazy()).collect()
        n = int(counts["count"].sum())
        planning = int(counts.filter(is_planning)["count"].sum())
        share = planning / n if n else None
        rows.append(
            {
                **dict(zip(setting.names, setting.values, strict=True)),
                "n_takeovers": n,
                "n_planning": planning,
                "share_takeover": share,
                "share_global": share_global,
                "enrichment": share / share_global if share is not None and share_global else None,
            }
        )
    schema = {c: settings.frame.schema[c] for c in settings.keys} | {
        "n_takeovers": pl.Int64(),
        "n_planning": pl.Int64(),
        "share_takeover": pl.Float64(),
        "share_global": pl.Float64(),
        "enrichment": pl.Float64(),
    }
    return pl.DataFrame(rows, schema=schema)
