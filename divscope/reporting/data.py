"""The token viewer's data: one JSON document of the responses a report embeds.

`viewer_document` is pure (a token table in, a dict out): it ranks the responses by their
largest `js`, keeps the most divergent half of `responses` and fills the rest with a seeded
random sample of the others, and stores each chosen response's tokens column by column, every
text once in a shared `strings` table. Given a LazyFrame it holds one row per response and the
chosen responses' tokens, never the table: the ranking is one streaming aggregation and the
chosen rows are selected by a streaming semi-join. `embed_json` writes the document so that it
can sit inside `<script type="application/json">` whatever its tokens hold.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl

from divscope.analyses._frames import Frame
from divscope.analyses._streaming import collect
from divscope.errors import DivscopeError

VERSION = 1
"""Version of the document's layout, read by `viewer.js`."""
COLOUR_COLUMNS: tuple[str, ...] = ("js", "ce_base_rl", "kl_base_rl", "entropy_base")
"""The columns the viewer can colour tokens by, in its order."""
HIGH_JS = 0.1
"""The core paper's high-divergence JS threshold: `n_high` counts tokens above it."""
DIGITS = 4
"""Significant digits of every float in the document."""
FLOAT_COLUMNS: tuple[str, ...] = (
    "p_base_of_rl_top1", "entropy_base", "entropy_rl", "js", "ce_base_rl", "kl_base_rl",
)  # fmt: skip
"""The per-token float columns of each response, in the document's order."""
VIEWER_COLUMNS: tuple[str, ...] = (
    "prompt_id", "sample_id", "position", "token", "top1_base", "top1_rl",
    "rl_top1_rank_in_base", *FLOAT_COLUMNS, "correct",
)  # fmt: skip
"""The token-table columns `viewer_document` reads."""
_KEY = ["prompt_id", "sample_id"]
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
            "\u2029": "\\u2029"}  # fmt: skip


def rounded(value: float | None, digits: int = DIGITS) -> float | None:
    """`value` to `digits` significant digits; None for a missing or non-finite value.

    >>> rounded(0.123456), rounded(123456.0), rounded(float("nan")), rounded(None)
    (0.1235, 123500.0, None, None)
    """
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{digits}g}")


def _rounded_list(values: Sequence[float | None]) -> list[float | None]:
    return [rounded(v) for v in values]


def thresholds(tokens: Frame) -> dict[str, float]:
    """The viewer's default threshold of each colour column: `js` > 0.1, and each other column
    at the same quantile of the table (`analyses.matched_thresholds`), or 1.0 when no token is
    above 0.1 in `js`.

    >>> frame = pl.DataFrame({"js": [0.0, 0.05, 0.2, 0.3], "ce_base_rl": [1.0, 4.0, 2.0, 3.0],
    ...     "kl_base_rl": [0.1, 0.2, 0.3, 0.4], "entropy_base": [1.0, 1.0, 1.0, 1.0]})
    >>> thresholds(frame)
    {'js': 0.1, 'ce_base_rl': 2.0, 'kl_base_rl': 0.2, 'entropy_base': 1.0}
    """
    from divscope.analyses import matched_thresholds

    lazy = tokens.lazy()
    n_high = collect(lazy.select((pl.col("js") > HIGH_JS).sum())).item()
    values: dict[str, float] = {"js": HIGH_JS}
    for column in COLOUR_COLUMNS[1:]:
        if not n_high:
            values[column] = 1.0
            continue
        try:
            (match,) = matched_thresholds(lazy, column, [HIGH_JS])
        except DivscopeError:
            values[column] = 1.0
        else:
            values[column] = rounded(match.value) if math.isfinite(match.value) else 1.0
    return values


def response_stats(tokens: Frame) -> pl.DataFrame:
    """One row per response: `prompt_id`, `sample_id`, `correct`, `n_tokens`, `mean_js`,
    `max_js`, `n_high` (tokens with js > 0.1), most divergent first (ties in key order); one
    streaming pass, memory in the number of responses."""
    stats = (
        tokens.lazy()
        .group_by(_KEY)
        .agg(
            pl.col("correct").first(),
            pl.len().alias("n_tokens"),
            pl.col("js").mean().alias("mean_js"),
            pl.col("js").max().alias("max_js"),
            (pl.col("js") > HIGH_JS).sum().alias("n_high"),
        )
    )
    return collect(stats).sort(["max_js", *_KEY], descending=[True, False, False], nulls_last=True)


def select_responses(stats: pl.DataFrame, responses: int, seed: int) -> pl.DataFrame:
    """The responses a report embeds: the ceil(responses/2) of `stats` with the largest
    `max_js` (`why` = "top"), then a random sample of the others drawn with
    `numpy.random.default_rng(seed)` up to `responses` in all (`why` = "sample"); all of them
    when the table holds fewer. `stats` is `response_stats`, most divergent first.

    >>> stats = pl.DataFrame({"prompt_id": list("abcde"), "sample_id": [0] * 5,
    ...     "max_js": [0.5, 0.4, 0.3, 0.2, 0.1]})
    >>> select_responses(stats, 3, seed=0)["why"].to_list()
    ['top', 'top', 'sample']
    """
    if responses < 1:
        raise DivscopeError(f"--responses {responses}: embed at least one response.")
    n_top = min(math.ceil(responses / 2), stats.height)
    rest = stats.height - n_top
    n_sample = min(responses - n_top, rest)
    rng = np.random.default_rng(seed)
    sampled = np.sort(rng.choice(rest, size=n_sample, replace=False)) + n_top if n_sample else []
    rows = np.concatenate([np.arange(n_top), np.asarray(sampled, dtype=np.int64)])
    why = ["top"] * n_top + ["sample"] * n_sample
    return stats[rows.tolist()].with_columns(why=pl.Series(why, dtype=pl.String))


class _Strings:
    """A deduplicated table of texts: `index(text)` is the text's position in `texts`."""

    def __init__(self) -> None:
        self.positions: dict[str, int] = {}

    def index(self, text: str) -> int:
        return self.positions.setdefault(text, len(self.positions))

    @property
    def texts(self) -> list[str]:
        return list(self.positions)


def viewer_document(
    tokens: Frame,
    *,
    responses: int,
    seed: int,
    decode: Callable[[int], str] | None = None,
) -> dict[str, Any]:
    """The token viewer's JSON document (docs: the report's page contract, version 1).

    Args:
        tokens: a token table (with at least `VIEWER_COLUMNS`).
        responses: how many responses to embed: the ceil(responses/2) most divergent (largest
            `js`) and a seeded random sample of the others.
        seed: seed of the sample.
        decode: the readable text of a token id (the base model's tokenizer, through
            `divscope.vocab.TokenPieces`); None writes `id N` for the top-1 tokens.

    Returns:
        A dict: `version`, `columns`, `thresholds`, `included`, `strings`, `responses`.

    Raises:
        DivscopeError: `responses` < 1, or a missing column.
    """
    from divscope.analyses._frames import checked_lazy

    lazy = checked_lazy(tokens, list(VIEWER_COLUMNS), what="the report's token viewer")
    stats = response_stats(lazy)
    chosen = select_responses(stats, responses, seed)
    # Only the chosen responses' rows are read (a streaming semi-join), then sorted in memory.
    rows = collect(
        lazy.select(VIEWER_COLUMNS).join(chosen.lazy().select(_KEY), on=_KEY, how="semi")
    ).sort([*_KEY, "position"])
    by_key = {key: frame for key, frame in rows.group_by(_KEY, maintain_order=True)}
    strings = _Strings()
    decoded: dict[int, str] = {}

    def top1(ids: Sequence[int | None]) -> list[int]:
        out = []
        for token_id in ids:
            if token_id is None:
                out.append(strings.index(""))
                continue
            if token_id not in decoded:
                decoded[token_id] = decode(token_id) if decode is not None else f"id {token_id}"
            out.append(strings.index(decoded[token_id]))
        return out

    documents = []
    for stat in chosen.iter_rows(named=True):
        frame = by_key[stat["prompt_id"], stat["sample_id"]]
        document = {
            "prompt_id": str(stat["prompt_id"]),
            "sample_id": int(stat["sample_id"]),
            "correct": stat["correct"],
            "n_tokens": int(stat["n_tokens"]),
            "mean_js": rounded(stat["mean_js"]),
            "max_js": rounded(stat["max_js"]),
            "n_high": int(stat["n_high"]),
            "why": stat["why"],
            "token": [strings.index(t or "") for t in frame["token"].to_list()],
            "top1_base": top1(frame["top1_base"].to_list()),
            "top1_rl": top1(frame["top1_rl"].to_list()),
            "rl_top1_rank_in_base": frame["rl_top1_rank_in_base"].to_list(),
        }
        document |= {c: _rounded_list(frame[c].to_list()) for c in FLOAT_COLUMNS}
        documents.append(document)
    n_top = sum(d["why"] == "top" for d in documents)
    return {
        "version": VERSION,
        "columns": list(COLOUR_COLUMNS),
        "thresholds": thresholds(lazy),
        "included": {
            "responses_total": stats.height,
            "top": n_top,
            "sampled": len(documents) - n_top,
            "seed": seed,
            "rule": _rule(n_top, len(documents) - n_top, stats.height),
        },
        "strings": strings.texts,
        "responses": documents,
    }


def embed_json(document: Any) -> str:
    """`document` as compact JSON safe inside `<script type="application/json">`: every `<`,
    `>`, `&`, U+2028 and U+2029 written as a `\\uXXXX` escape, so no text can close the tag.

    >>> embed_json({"token": "</script>"})
    '{"token":"\\\\u003c/script\\\\u003e"}'
    """
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for character, escape in _ESCAPES.items():
        text = text.replace(character, escape)
    return text


def _rule(top: int, sampled: int, total: int) -> str:
    """How the embedded responses were chosen, as the report's header says it.

    >>> _rule(10, 10, 960), _rule(3, 0, 3)
    ('the 10 most divergent (max js) and a seeded random sample of 10 others', 'all 3 responses')
    """
    if top + sampled == total:
        return f"all {total} responses"
    rule = f"the {top} most divergent (max js)"
    return rule + (f" and a seeded random sample of {sampled} others" if sampled else "")
