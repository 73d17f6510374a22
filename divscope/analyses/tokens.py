"""Which words diverge: planning-word enrichment, word frequencies, one token's profile.

Token strings are compared after `normalized_token`: leading-space markers (a space, `Ġ`, `▁`)
and surrounding whitespace stripped, lowercased, so " Wait", "Ġwait" and "wait" are one word.
Normalization runs on the distinct token strings only, which keeps it cheap on large tables.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from divscope.analyses._frames import DEFAULT_PERCENTILES, Frame, checked_lazy, top_count
from divscope.analyses._streaming import collect, top_rows
from divscope.analyses.distribution import DEFAULT_SPARSITY_THRESHOLDS, Sparsity, sparsity
from divscope.errors import DivscopeError

PLANNING_WORDS: frozenset[str] = frozenset(
    {
        "wait", "alternatively", "let", "first", "check", "verify", "hmm", "but", "maybe",
        "instead", "however", "try", "consider", "suppose", "recall", "so", "then", "next",
        "now", "therefore", "thus", "perhaps", "actually", "another", "since", "note", "assume",
        "double", "again", "means", "because", "if",
    }
)  # fmt: skip
"""divscope's planning lexicon: words that open, redirect or check a line of reasoning ("wait",
"alternatively", "let", "verify"...), compared after `normalized_token`.

Where it comes from: the takeover paper (*Reasoning Can Be Restored by Correcting a Few Decision
Tokens*, arXiv 2605.16874) sorts tokens into "planning" and "execution" and reports planning
tokens at 1.9% of all tokens of its base rollouts (`PAPER_PLANNING_SHARE`), 14.1% of the top
divergence tokens and 33.3% of its takeover set (17.6x), but the paper does not print its word
list (its code: github.com/AlphaLab-USTC/RRTokenIntervention). These 32 words are divscope's own
choice (words that open a step, reflect or check in reasoning traces), so a share measured with
them is comparable to the paper's in kind, not word for word; the global share (`share_all`) beside
the paper's 1.9% says how far apart the two lexicons' coverage is. Replace it with
`read_planning_words` (`--planning-words FILE`)."""

PAPER_PLANNING_SHARE = 0.019
"""The takeover paper's global planning share: 1.9% of all tokens of its base rollouts are
planning tokens (its own lexicon; 1.89% in its text)."""


def normalized_token(column: str = "token") -> pl.Expr:
    """The token string with leading-space markers and surrounding whitespace removed, lowercased.

    >>> frame = pl.DataFrame({"token": [" Wait", "Ġlet", "▁So\\n"]})
    >>> frame.select(normalized_token())["token"].to_list()
    ['wait', 'let', 'so']
    """
    return (
        pl.col(column)
        .str.replace(r"^[\sĠ▁]+", "")
        .str.strip_chars()
        .str.to_lowercase()
        .alias(column)
    )


def lexicon_words(lexicon: Iterable[str]) -> pl.Series:
    """The distinct words of `lexicon`, normalized as token strings are (`normalized_token`),
    sorted, the empty word left out.

    >>> lexicon_words([" Wait", "wait", "ĠHmm", "  "]).to_list()
    ['hmm', 'wait']
    """
    words = pl.DataFrame({"token": list(lexicon)}, schema={"token": pl.String})
    words = words.select(normalized_token())["token"]
    return words.filter(words != "").unique().sort()


def read_planning_words(path: str | os.PathLike) -> frozenset[str]:
    """The planning words of a text file (`--planning-words FILE`), to replace `PLANNING_WORDS`.

    The file is UTF-8 with one word per line. Each line is normalized as token strings are
    (`normalized_token`: a leading space marker, the surrounding whitespace and case do not
    count), blank lines are skipped, and a line with whitespace inside is refused: a word
    matches a token whose whole normalized string it is, never part of a token nor a run of
    tokens, so a word the tokenizer splits into pieces (" alternatively" as " altern" + "atively")
    matches none of them; list the pieces you mean to count.

    Raises:
        DivscopeError: a missing or unreadable file, a line of several words, or no word.

    >>> import tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name, "words.txt")
    >>> _ = path.write_text(" Wait\\n\\nĠHmm\\nverify  \\n", encoding="utf-8")
    >>> sorted(read_planning_words(path))
    ['hmm', 'verify', 'wait']
    >>> folder.cleanup()
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise DivscopeError(
            f"--planning-words {str(path)!r}: cannot read it ({error}); give a UTF-8 text file "
            "with one planning word per line."
        ) from error
    for number, line in enumerate(lines, start=1):
        if len(line.split()) > 1:
            raise DivscopeError(
                f"--planning-words {str(path)!r}, line {number}: {line!r} holds several words; "
                "a word is compared with one token, so put one word per line."
            )
    found = frozenset(lexicon_words(lines))
    if not found:
        raise DivscopeError(
            f"--planning-words {str(path)!r}: no word in it; give one planning word per line."
        )
    return found


def word_counts(lazy: pl.LazyFrame) -> pl.LazyFrame:
    """Counts per normalized word of the `token` column, normalizing each distinct token once."""
    return (
        lazy.group_by("token")
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .with_columns(normalized_token().alias("word"))
        .group_by("word")
        .agg(pl.col("count").sum())
    )


def _ranked_words(lazy: pl.LazyFrame) -> pl.LazyFrame:
    """`word_counts` without the empty word (pure whitespace), most frequent first, ties by
    word."""
    return (
        word_counts(lazy)
        .filter(pl.col("word") != "")
        .sort(["count", "word"], descending=[True, False])
    )


@dataclass(frozen=True)
class PlanningEnrichment:
    """Planning words among the most divergent tokens vs among all tokens."""

    metric: str
    """The divergence column."""
    top_share: float
    """Share of tokens counted as most divergent."""
    n_top: int
    """Most divergent tokens: ⌈top_share · n⌉."""
    share_top: float
    """Share of planning words among the most divergent tokens."""
    share_all: float
    """Share of planning words among all tokens."""
    enrichment: float
    """share_top / share_all (NaN when no token is a planning word)."""
    n_words: int
    """Words in the lexicon (32: `PLANNING_WORDS`)."""
    paper_share_all: float = PAPER_PLANNING_SHARE
    """The takeover paper's global share, 1.9% with its own lexicon, beside `share_all`."""


def planning_enrichment(
    tokens: Frame,
    metric: str = "js",
    *,
    top_share: float = 0.01,
    lexicon: Iterable[str] = PLANNING_WORDS,
) -> PlanningEnrichment:
    """Share of planning words among the top `top_share` most divergent tokens vs all tokens.

    The top tokens are the ⌈top_share · n⌉ with the largest `metric` (`top_rows`: ties at the
    cut to the first rows of the table, as in `early_density`, so both see one set of tokens).
    Out of core on a LazyFrame: only counts per distinct token string are held.

    Args:
        tokens: a token table with `token`.
        metric: the divergence column.
        top_share: share of tokens, most divergent first, in (0, 1].
        lexicon: the planning words, normalized as tokens are (`lexicon_words`; default
            `PLANNING_WORDS`;
            `read_planning_words` reads a file of them).

    Returns:
        A `PlanningEnrichment`: `share_all` is the global planning share, the paper's 1.9%
        beside it.

    >>> frame = pl.DataFrame({"token": [" Wait", " the", " so", " x"], "js": [0.6, 0.1, 0.0, 0.0]})
    >>> result = planning_enrichment(frame, top_share=0.25)
    >>> result.share_top, result.share_all, result.enrichment
    (1.0, 0.5, 2.0)
    """
    lazy = checked_lazy(tokens, ["token", metric], what="planning_enrichment")
    lazy = lazy.select("token", metric).drop_nulls(metric)
    words = lexicon_words(lexicon)
    # Counts per distinct token string: which strings are planning words, and how often.
    counts = collect(
        lazy.group_by("token")
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .with_columns(normalized_token().alias("word"))
    )
    planning = counts.filter(pl.col("word").is_in(words.implode()))
    n = int(counts["count"].sum())
    planning_all = int(planning["count"].sum())
    n_top = top_count(n, top_share)
    is_planning = pl.col("token").is_in(planning["token"].implode())
    planning_top = collect(top_rows(lazy, metric, n_top).select(is_planning.sum())).item()
    share_top = planning_top / n_top if n_top else float("nan")
    share_all = planning_all / n if n else float("nan")
    return PlanningEnrichment(
        metric=metric,
        top_share=top_share,
        n_top=n_top,
        share_top=share_top,
        share_all=share_all,
        enrichment=share_top / share_all if share_all else float("nan"),
        n_words=len(words),
    )


def word_frequencies(
    tokens: Frame, metric: str = "js", *, high: float = 0.1, low: float = 0.01, top: int = 50
) -> pl.DataFrame:
    """Most frequent words above `high` and below `low` divergence (the word clouds of Fig. 5).

    Tokens that normalize to an empty string (pure whitespace) are left out.

    Args:
        tokens: a token table with `token`.
        metric: the divergence column.
        high: the high group is metric > high.
        low: the low group is metric < low.
        top: words kept per group.

    Returns:
        Rows of group `high` then `low`: `group`, `word`, `count`, `share` (of the group's
        non-empty words), most frequent first, ties by word.

    >>> frame = pl.DataFrame({"token": [" Wait", "wait", " the"], "js": [0.5, 0.3, 0.0]})
    >>> word_frequencies(frame).rows()
    [('high', 'wait', 2, 1.0), ('low', 'the', 1, 1.0)]
    """
    lazy = checked_lazy(tokens, ["token", metric], what="word_frequencies")
    groups = {"high": pl.col(metric) > high, "low": pl.col(metric) < low}
    frames = []
    for name, condition in groups.items():
        counts = (
            _ranked_words(lazy.filter(condition))
            .with_columns((pl.col("count") / pl.col("count").sum()).alias("share"))
            .head(top)
            .select(pl.lit(name).alias("group"), "word", "count", "share")
        )
        frames.append(counts)
    return pl.concat(collect(frame) for frame in frames)


def token_profile(
    tokens: Frame,
    token: str,
    metric: str = "js",
    *,
    thresholds: Sequence[float] = DEFAULT_SPARSITY_THRESHOLDS,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> Sparsity:
    """The divergence distribution of one word across its occurrences (the paper's "the", Fig. 23).

    Args:
        tokens: a token table with `token`.
        token: the word; matched after normalization, so "the" also matches " The".
        metric: the divergence column.
        thresholds: near-zero cut-offs, as in `sparsity`.
        percentiles: percentiles, as in `sparsity`.

    Returns:
        The `Sparsity` of the word's occurrences (`n_tokens` = occurrences).

    >>> frame = pl.DataFrame({"token": [" the", "The", " cat"], "js": [0.0, 0.4, 0.9]})
    >>> token_profile(frame, "the", percentiles=(50,)).percentiles
    {50.0: 0.2}
    """
    lazy = checked_lazy(tokens, ["token", metric], what="token_profile")
    target = pl.DataFrame({"token": [token]}).select(normalized_token())["token"][0]
    matching = collect(lazy.select(pl.col("token").unique()).filter(normalized_token() == target))[
        "token"
    ]
    return sparsity(
        lazy.filter(pl.col("token").is_in(matching.implode())),
        metric,
        thresholds=thresholds,
        percentiles=percentiles,
    )


def most_frequent_words(tokens: Frame, *, top: int = 3) -> list[str]:
    """The `top` most frequent words (normalized as in `word_frequencies`), ties by word.

    >>> frame = pl.DataFrame({"token": [" the", "The", " x", "\\n", " y", " x"]})
    >>> most_frequent_words(frame, top=2)
    ['the', 'x']
    """
    lazy = checked_lazy(tokens, ["token"], what="most_frequent_words").select("token")
    return collect(_ranked_words(lazy).head(top))["word"].to_list()
