"""The one-call digest of a token table that `divscope analyze` prints and saves, paper by paper.

Each statistic is reported as the paper that defines it computes it, in its own section:

- `Summary.core`, *Sparse but Critical* (Meng et al., ICLR 2026), on `js` by default (truncated
  JS, the metric its thresholds were set on): sparsity below 1e-4/1e-3/1e-2 and the percentiles
  (Fig. 2), the positional profile (Fig. 3), entropy of low- vs high-divergence tokens split at
  0.1 (Fig. 4), word frequencies above 0.1 and below 0.01 (the word clouds, Fig. 5), the
  side-by-side sparsity of `compare_with` tables (Figs. 6, 12), top-k overlap above 0.01, 0.05,
  0.1 and 0.2 (Fig. 9), tail promotion above 0.1 (Fig. 10), rank reordering above 0.1 (Fig. 22);
- `Summary.takeover`, *Reasoning Can Be Restored by Correcting a Few Decision Tokens*, on
  `ce_base_rl` by default (its s_t = CE(p_b, p_r)): the Lorenz curve and Gini coefficient, the
  positional density of the top 1% (early bias), planning-word enrichment of the top 1%,
  failure AUROC of each response's top-100 mean beside base entropy, and the IoU of the top-p%
  divergent positions with the top-p% base-entropy positions;
- `Summary.rast`, *RAST*: the path coverage rate (the base model's greedy token is the
  trajectory's), on the RL model's trajectories;
- `Summary.cross_sample`, with cross-sample results: `cross_sample_report` (recovery, pass@k,
  majority@k, flips, differences, the takeover knee, ...).

Each section reads its paper's population of the table's trajectories (`populations`, by the
`source` column): the core section the RL model's, the takeover section base rollouts, RAST's
the RL model's; `Metrics.population` overrides one. Where a population is absent, the section is
computed on what is there and its `population.note` says so.

The takeover statistics rank tokens (top 1%, top-100, top p%, Gini) and apply to any metric.
The core paper's thresholds are JS values in nats: a core section on a metric other than `js`
or `js_full` is refused unless `rescale_thresholds`, which carries each threshold t to the
metric's value at the same quantile of the table (`matched_thresholds`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import polars as pl

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses._streaming import memory_cap
from divscope.analyses.coverage import COVERAGE_COLUMNS, PathCoverage, path_coverage
from divscope.analyses.cross_sample_report import CrossSampleReport, cross_sample_report
from divscope.analyses.difficulty import DIFFICULTY_THRESHOLDS, Difficulty, by_difficulty
from divscope.analyses.distribution import (
    DEFAULT_SPARSITY_THRESHOLDS,
    Lorenz,
    MatchedThreshold,
    Sparsity,
    compare,
    lorenz,
    matched_thresholds,
    sparsity,
)
from divscope.analyses.failure import FailureAUROC, failure_auroc
from divscope.analyses.populations import (
    SECTIONS,
    Population,
    SourceRoles,
    companion_population,
    parse_populations,
    population,
    response_rows,
    with_source,
)
from divscope.analyses.position import early_density, positional_profile
from divscope.analyses.shift import (
    DEFAULT_OVERLAP_THRESHOLDS,
    RankReordering,
    TailPromotion,
    entropy_by_divergence,
    entropy_iou,
    rank_reordering,
    tail_promotion,
    topk_overlap,
)
from divscope.analyses.tokens import (
    PLANNING_WORDS,
    PlanningEnrichment,
    planning_enrichment,
    read_planning_words,
    word_frequencies,
)
from divscope.defaults import CORE_METRIC, TAKEOVER_METRIC
from divscope.errors import DivscopeError
from divscope.memory_plan import parse_memory
from divscope.params import Flag, Recovery
from divscope.schema import OVERLAP_KS

SUMMARY_COLUMNS: tuple[str, ...] = tuple(dict.fromkeys((
    "prompt_id", "sample_id", "position", "n_tokens", "token", "entropy_base", "entropy_rl",
    "rl_top1_rank_in_base", "rl_top2_rank_in_base", "rl_top3_rank_in_base",
    "p_base_of_rl_top1", "p_top1_rl", *(f"overlap_{k}" for k in OVERLAP_KS), "correct",
    *COVERAGE_COLUMNS,
)))  # fmt: skip
"""The token-table columns `summary` reads besides the divergence columns."""

JS_METRICS: tuple[str, ...] = ("js", "js_full")
"""The metrics on the scale of the core paper's thresholds (JS in nats, at most ln 2)."""
CORE_PAPER = "Sparse but Critical (Meng et al., ICLR 2026)"
TAKEOVER_PAPER = "Reasoning Can Be Restored by Correcting a Few Decision Tokens (arXiv 2605.16874)"
RAST_PAPER = "RAST (arXiv 2506.15710)"


@dataclass(frozen=True)
class CoreThresholds:
    """The core paper's thresholds, each applied as metric > t (or < t for the low groups)."""

    near_zero: tuple[float, ...] = DEFAULT_SPARSITY_THRESHOLDS
    """Sparsity: share of tokens strictly below each (Fig. 2)."""
    entropy_split: float = 0.1
    """Entropy by divergence: low < split < high (Fig. 4)."""
    overlap: tuple[float, ...] = DEFAULT_OVERLAP_THRESHOLDS
    """Top-k overlap among the tokens above each (Fig. 9)."""
    rank: float = 0.1
    """Rank reordering at the positions above it (Fig. 22)."""
    tail: float = 0.1
    """Tail promotion at the positions above it (Fig. 10)."""
    words_high: float = 0.1
    """Word frequencies of the tokens above it (Fig. 5)."""
    words_low: float = 0.01
    """Word frequencies of the tokens below it (Fig. 5)."""

    def values(self) -> tuple[float, ...]:
        """Every distinct threshold, ascending."""
        singles = (self.entropy_split, self.rank, self.tail, self.words_high, self.words_low)
        return tuple(sorted({*self.near_zero, *self.overlap, *singles}))

    def mapped(self, value: Callable[[float], float]) -> CoreThresholds:
        """The thresholds with each t replaced by `value(t)`."""
        return CoreThresholds(
            **{
                f.name: tuple(map(value, v)) if isinstance(v, tuple) else value(v)
                for f in dataclasses.fields(self)
                for v in [getattr(self, f.name)]
            }
        )

    def describe(self) -> str:
        """The thresholds in words, for messages."""

        def join(values: Sequence[float]) -> str:
            return "/".join(f"{t:g}" for t in values)

        return (
            f"near-zero {join(self.near_zero)}, entropy split {self.entropy_split:g}, top-k "
            f"overlap {join(self.overlap)}, ranks {self.rank:g}, tails {self.tail:g}, word "
            f"clouds {self.words_high:g}/{self.words_low:g}"
        )


CORE_THRESHOLDS = CoreThresholds()
"""The core paper's thresholds, on the JS scale."""


@dataclass(frozen=True)
class CoreSection:
    """The core paper's statistics (*Sparse but Critical*) on one metric."""

    metric: str
    """The divergence column (default `js`)."""
    thresholds: CoreThresholds
    """The thresholds applied, on `metric`'s scale (the paper's JS values, or rescaled)."""
    rescaled: tuple[MatchedThreshold, ...] | None
    """How each JS threshold was carried to `metric` (`matched_thresholds`); None on JS."""
    sparsity: Sparsity
    positional_profile: pl.DataFrame
    entropy_by_divergence: pl.DataFrame
    topk_overlap: pl.DataFrame
    rank_reordering: RankReordering
    tail_promotion: TailPromotion
    word_frequencies: pl.DataFrame
    comparison: pl.DataFrame | None
    """`compare` of this table and the `compare_with` tables; None without them."""
    population: Population
    """The trajectories the section read (default: the RL model's)."""
    comparison_populations: Mapping[str, Population] | None = None
    """Label -> the trajectories each side of `comparison` read: this table's population, and
    each compared table's on the same trajectories where it holds them (else its own tuned
    model's); None without `compare_with`."""
    paper: str = CORE_PAPER


@dataclass(frozen=True)
class TakeoverSection:
    """The takeover paper's statistics on one metric: every one ranks tokens, no threshold."""

    metric: str
    """The divergence column (default `ce_base_rl`)."""
    lorenz: Lorenz
    early_density: pl.DataFrame
    """`early_density` of the top 1%."""
    planning_enrichment: PlanningEnrichment
    """Planning words among the top 1% vs all tokens (the global share beside the paper's)."""
    failure_auroc: FailureAUROC | None
    """Top-100 mean per response; None when the table is not graded with both outcomes."""
    entropy_iou: pl.DataFrame
    """`entropy_iou` at the top 1, 5, 10 and 20%."""
    notes: tuple[str, ...]
    """Why a statistic was skipped."""
    population: Population
    """The trajectories the section read (default: base rollouts)."""
    paper: str = TAKEOVER_PAPER


@dataclass(frozen=True)
class RastSection:
    """RAST's path coverage rate of the table's trajectories."""

    path_coverage: PathCoverage
    population: Population
    """The trajectories the section read (default: the RL model's)."""
    paper: str = RAST_PAPER


@dataclass(frozen=True)
class Summary:
    """Every headline statistic of one token table, section by section, plus the optional
    cross-sample report."""

    n_tokens: int
    """Rows of the token table."""
    n_responses: int
    """Distinct (prompt_id, sample_id)."""
    n_prompts: int
    """Distinct prompt_id."""
    core: CoreSection
    takeover: TakeoverSection
    rast: RastSection
    cross_sample: CrossSampleReport | None
    """`cross_sample_report` of the cross-sample results; None without them."""
    difficulty: Difficulty | None = None
    """`by_difficulty` of the table (and the cross-sample results) by base pass@1 tertile;
    None without tertiles."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: frames become lists of row dicts, NaN becomes None."""
        return to_jsonable(self)


def to_jsonable(value: Any) -> Any:
    """Convert analysis results (dataclasses, frames, dicts, floats) to JSON-ready values.

    >>> to_jsonable({"gini": float("nan"), "rows": pl.DataFrame({"a": [1]}), "share": (0.5,)})
    {'gini': None, 'rows': [{'a': 1}], 'share': [0.5]}
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, pl.DataFrame):
        return [to_jsonable(row) for row in value.to_dicts()]
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class Metrics:
    """Which divergence column and which trajectories each paper's section reads, and the
    takeover section's planning words.

    >>> Metrics().sections, Metrics("kl_rl_base").sections, Metrics(core_metric="js_full").sections
    (('js', 'ce_base_rl'), ('kl_rl_base', 'kl_rl_base'), ('js_full', 'ce_base_rl'))
    >>> Metrics(population=("takeover=rl",)).population_of("takeover")
    'rl'
    """

    metric: str | None = None
    """Divergence column of both sections, core and takeover (overrides --core-metric and
    --takeover-metric): js, js_full, kl_base_rl, kl_rl_base, ce_base_rl."""
    core_metric: str = CORE_METRIC
    """Divergence column of the core paper's statistics and figures (its thresholds are on the
    JS scale)."""
    takeover_metric: str = TAKEOVER_METRIC
    """Divergence column of the takeover paper's statistics and figures (Lorenz/Gini, early
    density, failure AUROC): CE(p_b, p_r) there."""
    rescale_thresholds: bool = False
    """With a non-JS core metric, map each of the core paper's JS thresholds t to the metric's
    value at the same quantile (the share of tokens with js > t) instead of refusing them."""
    planning_words: Path | None = None
    """File of planning words (UTF-8, one per line) for the takeover section's planning
    enrichment, replacing divscope's 32: a word counts where a whole token equals it, case, a
    leading space and surrounding whitespace ignored."""
    population: Annotated[tuple[str, ...], Flag(metavar="SECTION=SOURCE")] = ()
    """The trajectories a section reads (repeat): SECTION core, takeover or rast; SOURCE a role
    (base, rl), a value of the table's source column, or all. Default: each paper's, core on rl
    trajectories, takeover on base rollouts, rast on rl trajectories."""
    max_memory: Annotated[int | None, Flag(parse=parse_memory, metavar="SIZE")] = None
    """Memory the analyses may hold at once (e.g. 2GiB, 512MB): how many values one pass of the
    out-of-core statistics collects, and polars' streaming chunk size. Default: 16.8 M values
    per pass (about 1 GiB at the peak); the table itself is never held."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "population", tuple(self.population))
        parse_populations(self.population)
        if self.max_memory is not None and self.max_memory < 1:
            raise DivscopeError(f"--max-memory must be >= 1 byte, got {self.max_memory}.")

    def population_of(self, section: str) -> str | None:
        """The population given for `section` (`--population`); None: the paper's."""
        given = dict(spec.partition("=")[::2] for spec in self.population)
        return {k.strip(): v.strip() for k, v in given.items()}.get(section)

    @property
    def sections(self) -> tuple[str, str]:
        """The (core, takeover) metrics: `metric` for both when given, else each section's own."""
        return self.metric or self.core_metric, self.metric or self.takeover_metric

    @property
    def lexicon(self) -> frozenset[str]:
        """The planning words: those of `planning_words`, else `PLANNING_WORDS`."""
        if self.planning_words is None:
            return PLANNING_WORDS
        return read_planning_words(self.planning_words)

    @property
    def carried(self) -> bool:
        """Whether the core paper's JS thresholds are carried to a non-JS core metric."""
        return self.rescale_thresholds and self.sections[0] not in JS_METRICS


def section_populations(
    frame: Frame,
    metrics: Metrics,
    roles: Mapping[str, str | None] | None = None,
    *,
    responses: pl.DataFrame | None = None,
) -> tuple[dict[str, Frame], dict[str, Population]]:
    """Each section's rows of `frame` and what they are (`populations.population`): the paper's
    population, or `metrics.population`'s. A LazyFrame gives LazyFrames, filtered lazily;
    `responses` (`response_rows(frame)`) saves the pass that counts them.

    >>> frame = pl.DataFrame({"prompt_id": ["a", "b"], "sample_id": [0, 0],
    ...     "source": ["base", "rl"]})
    >>> frames, used = section_populations(frame, Metrics(population=("rast=all",)))
    >>> {s: f.height for s, f in frames.items()}, used["takeover"].description
    ({'core': 1, 'takeover': 1, 'rast': 2}, 'base rollouts')
    """
    frames: dict[str, Frame] = {}
    used: dict[str, Population] = {}
    responses = response_rows(frame) if responses is None else responses
    for section in SECTIONS:
        frames[section], used[section] = population(
            frame, section, metrics.population_of(section), roles, responses=responses
        )
    return frames, used


def core_thresholds(
    tokens: Frame, metric: str, *, rescale: bool = False
) -> tuple[CoreThresholds, tuple[MatchedThreshold, ...] | None]:
    """The core paper's thresholds for `metric`, and how they were carried there.

    On `js` and `js_full` the paper's values apply as they are. On any other metric they are
    refused, unless `rescale`: then each JS threshold t becomes the value v of `metric` with as
    many tokens above it as have js > t on this table (`matched_thresholds`).

    Args:
        tokens: the token table (with `js` when rescaling).
        metric: the core section's divergence column.
        rescale: carry the thresholds to a non-JS metric instead of refusing.

    Returns:
        (the thresholds on `metric`'s scale, the mapping or None on JS).

    Raises:
        DivscopeError: a non-JS metric without `rescale`.

    >>> tokens = pl.DataFrame({"js": [0.0, 0.001, 0.05, 0.2], "kl_rl_base": [0.0, 0.01, 0.4, 1.5]})
    >>> core_thresholds(tokens, "js")[0].near_zero
    (0.0001, 0.001, 0.01)
    >>> thresholds, carried = core_thresholds(tokens, "kl_rl_base", rescale=True)
    >>> thresholds.rank, [(m.threshold, m.value) for m in carried][-2:]
    (0.4, [(0.1, 0.4), (0.2, 1.5)])
    """
    if metric in JS_METRICS:
        return CORE_THRESHOLDS, None
    if not rescale:
        raise DivscopeError(
            f"summary: the core paper's thresholds ({CORE_THRESHOLDS.describe()}) are JS values "
            f"in nats, and the core section's metric is {metric!r}. Either keep that section on "
            "js or js_full (--core-metric, default js; --metric sets both sections, "
            "--takeover-metric the takeover section alone), or pass --rescale-thresholds "
            f"(rescale_thresholds=True) to carry each threshold to {metric} at the same quantile "
            "of this table."
        )
    mapping = matched_thresholds(tokens, metric, CORE_THRESHOLDS.values(), reference="js")
    values = {m.threshold: m.value for m in mapping}
    return CORE_THRESHOLDS.mapped(values.__getitem__), mapping


def summary(
    tokens: Frame,
    metrics: Metrics = Metrics(),  # noqa: B008 (frozen, hashable)
    recovery: Recovery = Recovery(),  # noqa: B008 (frozen, hashable)
    *,
    label: str = "main",
    compare_with: Mapping[str, Frame] | None = None,
    cross_sample: Frame | None = None,
    reference: str | Frame | None = None,
    differences: Sequence[str] = (),
    difficulty: pl.DataFrame | None = None,
    roles: SourceRoles = SourceRoles(),  # noqa: B008 (frozen)
) -> Summary:
    """Run every token-table analysis as its paper computes it, and the optional comparisons.

    Nothing holds the table's rows: given a LazyFrame (a scan of a Parquet table or of a
    directory of parts), every analysis scans the needed columns of its population with polars'
    streaming engine and keeps only aggregates (`_streaming`: exact order statistics out of
    core, under `memory_cap(metrics.max_memory)`). A DataFrame gives the same numbers.

    Args:
        tokens: the token table.
        metrics: each section's divergence column, the planning words (`Metrics.lexicon`),
            whether the core paper's JS thresholds are carried to a non-JS core metric at the
            same quantile (see `core_thresholds`) instead of refused, and the memory cap.
        recovery: how recovery and every interval are estimated (measure, controls,
            bootstrap).
        label: this table's label in `core.comparison`.
        compare_with: label -> other token tables (e.g. {"sft": sft_tokens}) for `compare`,
            with the core section's metric and thresholds.
        cross_sample: cross-sample results for `cross_sample_report`.
        reference: the upper bound of recovery: None (the matched `rl` control), a policy
            label of `cross_sample`, or graded responses of a third model.
        differences: pairs of settings to compare with paired CIs, "A - B" with each side
            column=value[,column=value], e.g. "policy=rl-replace - policy=base-greedy".
        difficulty: per prompt its base pass@1 tertile (`difficulty_tertiles`), for
            `by_difficulty` on the core section's metric and population (with
            `cross_sample`'s recovery).
        roles: the `sources` metadata of `tokens` and of the `compare_with` tables: which
            source values are the base model's and which the tuned model's (`populations`).

    Returns:
        A `Summary`.

    Raises:
        DivscopeError: a missing column, JS thresholds on another core metric without
            `rescale_thresholds`, or `reference`, `recovery_at` or `differences` without
            `cross_sample`.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> frame = pl.DataFrame({"prompt_id": ["a"] * 50 + ["b"] * 50, "sample_id": [0] * 100,
    ...     "position": list(range(50)) * 2, "n_tokens": [50] * 100, "token": [" x"] * 100,
    ...     "token_id": [1] * 100, "top1_base": [1, 2] * 50,
    ...     "js": rng.random(100) * 0.3, "ce_base_rl": rng.random(100) * 3,
    ...     "entropy_base": rng.random(100), "entropy_rl": rng.random(100),
    ...     "rl_top1_rank_in_base": [2] * 100, "rl_top2_rank_in_base": [1] * 100,
    ...     "rl_top3_rank_in_base": [3] * 100, "p_base_of_rl_top1": [0.2] * 100,
    ...     "p_top1_rl": [0.7] * 100, **{f"overlap_{k}": [1.0] * 100 for k in OVERLAP_KS},
    ...     "correct": [None] * 100})
    >>> result = summary(frame, recovery=Recovery(n_boot=10))
    >>> result.core.metric, result.takeover.metric, result.rast.path_coverage.pooled.estimate
    ('js', 'ce_base_rl', 0.5)
    """
    with memory_cap(metrics.max_memory):
        return _summary(
            tokens,
            metrics,
            recovery,
            label=label,
            compare_with=compare_with,
            cross_sample=cross_sample,
            reference=reference,
            differences=differences,
            difficulty=difficulty,
            roles=roles,
        )


def _summary(
    tokens: Frame,
    metrics: Metrics,
    recovery: Recovery,
    *,
    label: str,
    compare_with: Mapping[str, Frame] | None,
    cross_sample: Frame | None,
    reference: str | Frame | None,
    differences: Sequence[str],
    difficulty: pl.DataFrame | None,
    roles: SourceRoles,
) -> Summary:
    recovery_at = recovery.recovery_at
    if cross_sample is None and (reference is not None or recovery_at is not None or differences):
        raise DivscopeError(
            "summary: reference, recovery_at and differences apply to cross-sample results; "
            "pass the results too (--cross-sample)."
        )
    core, takeover = metrics.sections
    lexicon = metrics.lexicon  # a bad --planning-words file is refused before the table is read
    columns = [*SUMMARY_COLUMNS, core, takeover, *(["js"] if metrics.carried else [])]
    lazy = with_source(checked_lazy(tokens, columns, what="summary"))
    # Every analysis scans the table lazily with bounded memory: nothing here holds its rows.
    frame = lazy.select(list(dict.fromkeys([*columns, "source"])))
    responses = response_rows(frame)  # one streaming pass: rows per response and source
    frames, populations = section_populations(frame, metrics, roles.tokens, responses=responses)
    thresholds, rescaled = core_thresholds(frames["core"], core, rescale=metrics.rescale_thresholds)
    # The difficulty shares' JS thresholds, carried to the core metric as the core section's.
    carried = {t: t for t in DIFFICULTY_THRESHOLDS} | {m.threshold: m.value for m in rescaled or ()}
    counts = responses.select(
        pl.col("rows").sum().alias("tokens"),
        pl.struct("prompt_id", "sample_id").n_unique().alias("responses"),
        pl.col("prompt_id").n_unique().alias("prompts"),
    ).row(0, named=True)
    report = None
    if cross_sample is not None:
        report = cross_sample_report(
            cross_sample,
            recovery,
            reference=reference,
            differences=tuple(differences),
            tokens=frames["takeover"],
            lexicon=lexicon,
        )
    return Summary(
        n_tokens=int(counts["tokens"] or 0),
        n_responses=int(counts["responses"]),
        n_prompts=int(counts["prompts"]),
        core=_core_section(
            frames["core"],
            core,
            thresholds,
            rescaled,
            populations["core"],
            label=label,
            compare_with=compare_with,
            compare_roles=roles.compare,
        ),
        takeover=_takeover_section(
            frames["takeover"],
            takeover,
            populations["takeover"],
            lexicon,
            n_boot=recovery.n_boot,
            seed=recovery.seed,
        ),
        rast=RastSection(
            path_coverage=path_coverage(frames["rast"], n_boot=recovery.n_boot, seed=recovery.seed),
            population=populations["rast"],
        ),
        cross_sample=report,
        difficulty=None
        if difficulty is None
        else by_difficulty(
            frames["core"],
            difficulty,
            results=cross_sample,
            metric=core,
            thresholds=tuple(carried[t] for t in DIFFICULTY_THRESHOLDS),
            reference=reference,
            recovery=recovery,
        ),
    )


def _core_section(
    frame: Frame,
    metric: str,
    thresholds: CoreThresholds,
    rescaled: tuple[MatchedThreshold, ...] | None,
    used: Population,
    *,
    label: str,
    compare_with: Mapping[str, Frame] | None,
    compare_roles: Mapping[str, Mapping[str, str | None]],
) -> CoreSection:
    comparison = sides = None
    if compare_with:
        tables, sides = {label: frame}, {label: used}
        for name, table in compare_with.items():
            tables[name], sides[name] = companion_population(
                table, "core", used, compare_roles.get(name)
            )
        comparison = compare(tables, metric, thresholds=thresholds.near_zero)
    return CoreSection(
        metric=metric,
        population=used,
        thresholds=thresholds,
        rescaled=rescaled,
        sparsity=sparsity(frame, metric, thresholds=thresholds.near_zero),
        positional_profile=positional_profile(frame, metric),
        entropy_by_divergence=entropy_by_divergence(frame, metric, split=thresholds.entropy_split),
        topk_overlap=topk_overlap(frame, metric, thresholds=thresholds.overlap),
        rank_reordering=rank_reordering(frame, metric, threshold=thresholds.rank),
        tail_promotion=tail_promotion(frame, metric, threshold=thresholds.tail),
        word_frequencies=word_frequencies(
            frame, metric, high=thresholds.words_high, low=thresholds.words_low, top=20
        ),
        comparison=comparison,
        comparison_populations=sides,
    )


def _takeover_section(
    frame: Frame,
    metric: str,
    used: Population,
    lexicon: frozenset[str],
    *,
    n_boot: int,
    seed: int,
) -> TakeoverSection:
    notes = []
    try:
        failure = failure_auroc(frame, metric, top_n=100, n_boot=n_boot, seed=seed)
    except DivscopeError as error:
        failure = None
        notes.append(f"failure_auroc skipped: {error}")
    return TakeoverSection(
        metric=metric,
        population=used,
        lorenz=lorenz(frame, metric),
        early_density=early_density(frame, metric, top_share=0.01),
        planning_enrichment=planning_enrichment(frame, metric, top_share=0.01, lexicon=lexicon),
        failure_auroc=failure,
        entropy_iou=entropy_iou(frame, metric),
        notes=tuple(notes),
    )
