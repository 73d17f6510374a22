"""Every figure divscope can draw, and writing all that given inputs allow to a directory.

`FIGURES` names each figure, what it needs, the paper it is from and its caption; `write_figures`
draws them from in-memory inputs (`divscope.plot`, in `figures.plot`, from files). The output
directory is written under a temporary name and renamed into place when complete, `index.md`
last, so an interrupted run never leaves a directory that looks finished.

Each figure belongs to the section of its paper, as in `divscope analyze`, and is drawn on that
section's metric: the core paper's (*Sparse but Critical*) on `js` by default, the takeover
paper's (Lorenz/Gini, the early density of the top 1%, failure ROC, the takeover knee) on
`ce_base_rl`. The core figures' thresholds are JS values in nats: on another core metric those
figures are skipped with the reason, unless `Metrics.rescale_thresholds` carries each threshold
to the metric at the same quantile of the token table (`analyses.matched_thresholds`).
"""

from __future__ import annotations

import inspect
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, BinaryIO, Literal

from matplotlib.figure import Figure

from divscope import analyses, figures
from divscope.analyses._frames import Frame
from divscope.analyses.populations import (
    Population,
    Section,
    SourceRoles,
    companion_population,
    population,
    with_source,
)
from divscope.analyses.summary import (
    CORE_PAPER,
    JS_METRICS,
    RAST_PAPER,
    SUMMARY_COLUMNS,
    TAKEOVER_PAPER,
    Metrics,
)
from divscope.errors import DivscopeError
from divscope.figures.style import metric_symbol
from divscope.io import upgrade_effective
from divscope.params import Recovery

Need = Literal["tokens", "compare", "evolution", "cross_sample"]
SECTIONS: dict[Section, str] = {
    "core": f"Core paper: {CORE_PAPER}",
    "takeover": f"Takeover paper: {TAKEOVER_PAPER}",
    "rast": RAST_PAPER,
}
"""Each section's heading in `index.md`, in the order it lists them."""
FORMATS: tuple[str, ...] = ("png", "pdf", "svg")
PNG_DPI = 200
SAMPLE_NOTE = (
    "fitted on a uniform sample of at most {n:,} tokens per group, drawn at random with seed "
    "{seed} (the dashed medians are of every token)"
)
"""How the KDEs of per-token values are drawn: a bounded sample (`analyses.sample_rows`), so
that memory does not grow with the table."""


@dataclass(frozen=True)
class PlotInputs:
    """What the figures are drawn from; only `tokens` is required."""

    tokens: Frame
    """The token table (RL checkpoint against base)."""
    label: str = "rl"
    """Label of `tokens` beside the `compare` tables."""
    compare: Mapping[str, Frame] = field(default_factory=dict)
    """Label -> another token table on the same trajectories (e.g. the SFT control)."""
    evolution: Mapping[int, Frame] = field(default_factory=dict)
    """Training step -> token table of that RL checkpoint."""
    cross_sample: Frame | None = None
    """Cross-sample results (docs/contracts.md, "Cross-sample results")."""
    reference: Frame | str | None = None
    """The upper bound of recovery: graded responses of a third model, a policy label of
    `cross_sample`, or None for the matched `rl` control."""
    metrics: Metrics = Metrics()
    """Each section's divergence column; on a core metric other than `js`/`js_full`, with
    `rescale_thresholds`, the core figures' JS thresholds are carried to it at the same quantile
    of `tokens` instead of those figures being skipped."""
    recovery: Recovery = Recovery()
    """Recovery of the cross-sample figures (on pass@k at `recovery_at`, else on mean@n), the
    resamples of every interval, and the seed of every sample and bootstrap."""
    max_samples: int = 20_000
    """Tokens per group that the entropy KDEs are fitted on (a seeded sample beyond)."""
    max_points: int = 5_000
    """Points drawn in the scatter of `tail_promotion` (a seeded sample beyond)."""
    roles: SourceRoles = SourceRoles()
    """Each token table's `sources` metadata: which source values are the base model's and
    which the tuned model's; each section's figures are drawn on its population."""
    _carried: dict[tuple[float, str], analyses.MatchedThreshold] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _populations: dict[str, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.cross_sample is not None:  # results of an earlier version: renamed, noted
            object.__setattr__(self, "cross_sample", upgrade_effective(self.cross_sample)[0])

    def metric_of(self, section: Section) -> str:
        """The divergence column of `section`'s figures (RAST's figures read no token-table
        metric: theirs is the core one, unused)."""
        core, takeover = self.metrics.sections
        return takeover if section == "takeover" else core

    def population(self, section: Section) -> tuple[Frame, Population]:
        """`section`'s rows of `tokens` and what they are (`analyses.populations`): the
        paper's population, or `metrics.population`'s; resolved once."""
        if not self._populations:
            tokens = with_source(self.tokens)
            for name in SECTIONS:
                wanted = self.metrics.population_of(name)
                self._populations[name] = population(tokens, name, wanted, self.roles.tokens)
        return self._populations[section]

    def companions(self) -> tuple[dict[str, tuple[Frame, Population]], dict[int, Any]]:
        """The --compare tables by label and the --evolution checkpoints by step, each on the
        core population's trajectories where it holds them, else on its own tuned model's
        (`analyses.populations.companion_population`); resolved once."""
        if "companions" not in self._populations:
            main = self.population("core")[1]
            self._populations["companions"] = (
                {
                    name: companion_population(table, "core", main, self.roles.compare.get(name))
                    for name, table in self.compare.items()
                },
                {
                    step: companion_population(table, "core", main, self.roles.evolution.get(step))
                    for step, table in self.evolution.items()
                },
            )
        return self._populations["companions"]

    @property
    def tables(self) -> dict[str, Frame]:
        """The core population of `tokens` under `label`, then the `compare` tables on theirs:
        what a comparison figure draws."""
        compared = {name: rows for name, (rows, _) in self.companions()[0].items()}
        return {self.label: self.population("core")[0], **compared}

    @property
    def checkpoints(self) -> dict[int, Frame]:
        """The `evolution` checkpoints, each on its population (see `companions`)."""
        return {step: rows for step, (rows, _) in self.companions()[1].items()}

    def carried(self, thresholds: Iterable[float], metric: str) -> list[analyses.MatchedThreshold]:
        """Each JS threshold carried to `metric` at the same quantile of the core population
        of `tokens` (`analyses.matched_thresholds`), computed once per threshold and metric."""
        thresholds = [float(t) for t in thresholds]
        missing = [t for t in thresholds if (t, metric) not in self._carried]
        if missing:
            core = self.population("core")[0]
            for match in analyses.matched_thresholds(core, metric, missing):
                self._carried[match.threshold, metric] = match
        return [self._carried[t, metric] for t in thresholds]


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the gallery."""

    name: str
    """File stem and `--figure` name."""
    needs: Need
    """The input the figure cannot be drawn without."""
    section: Section
    """The paper the figure is from: it is drawn on that section's metric and listed under
    that paper's heading of `index.md`."""
    caption: str
    """What the figure shows, for `index.md`; `{metric}` (the section's), `{n}`, `{points}` and
    `{seed}` are filled in from the inputs."""
    draw: Callable[[PlotInputs], Figure]
    """Draws the figure from the inputs."""
    js_thresholds: tuple[float, ...] = ()
    """The core paper's JS thresholds the figure applies: on a metric other than `js`/`js_full`
    they are refused, or carried to it with `Metrics.rescale_thresholds`."""
    note: Callable[[PlotInputs], str | None] | None = None
    """A sentence the caption ends with where the inputs call for one (e.g. why a panel is
    empty); None: none."""

    def __post_init__(self) -> None:
        if self.section not in SECTIONS:
            raise ValueError(f"FigureSpec {self.name}: section must be one of {list(SECTIONS)}.")


def _table_figure(
    name: str,
    needs: Need,
    section: Section,
    caption: str,
    function: Callable[..., Figure],
    *,
    js: Sequence[str] = (),
    note: Callable[[PlotInputs], str | None] | None = None,
    **options: str,
) -> FigureSpec:
    """The spec of a figure of token tables: `function(data, metric=..., **thresholds, **options)`.

    `data` is what `needs` names (the token table, `PlotInputs.tables` or the checkpoints),
    `metric` the section's; `js` names `function`'s keyword arguments whose defaults are the
    paper's JS thresholds, passed as they are on a JS metric and carried to another one (or
    refused); `note` ends the caption (`FigureSpec.note`); `options` maps other keyword
    arguments to the `PlotInputs` fields they take (dotted: `recovery.seed`).
    """
    parameters = inspect.signature(function).parameters
    thresholds: dict[str, Any] = {keyword: parameters[keyword].default for keyword in js}

    def draw(inputs: PlotInputs) -> Figure:
        metric = inputs.metric_of(section)
        reason = _refusal(spec, inputs)
        if reason is not None:
            raise DivscopeError(reason)
        data = {
            "tokens": inputs.population(section)[0],
            "compare": inputs.tables,
            "evolution": inputs.checkpoints,
        }
        return function(
            data[needs],
            metric=metric,
            **{keyword: _on_metric(value, inputs, metric) for keyword, value in thresholds.items()},
            **{keyword: attrgetter(attribute)(inputs) for keyword, attribute in options.items()},
        )

    values = sorted({t for v in thresholds.values() for t in (v if isinstance(v, tuple) else (v,))})
    spec = FigureSpec(name, needs, section, caption, draw, js_thresholds=tuple(values), note=note)
    return spec


def _evolution_note(inputs: PlotInputs) -> str | None:
    """Why the overlap with the final checkpoint is left out, where it is: the steps whose
    tables score other trajectories than the final step's (sampled at each step)."""
    shared = analyses.shared_trajectories(inputs.checkpoints)
    other = [step for step, same in shared.items() if not same]
    if not other:
        return None
    listed = ", ".join(map(str, other))
    return (
        f"The tables of step(s) {listed} score other responses than the final step's (the policy "
        "sampled at each step, as the monitor does): their overlap with the final divergent "
        "positions is not defined and is left out (null); the percentiles and shares compare the "
        "steps on the responses each sampled."
    )


def _refusal(spec: FigureSpec, inputs: PlotInputs) -> str | None:
    """Why `spec` may not apply its JS thresholds to its section's metric; None when it may."""
    metric = inputs.metric_of(spec.section)
    if not spec.js_thresholds or metric in JS_METRICS or inputs.metrics.rescale_thresholds:
        return None
    listing = ", ".join(f"{t:g}" for t in spec.js_thresholds)
    return (
        f"its thresholds ({listing}) are JS values in nats and would be applied to {metric}; "
        f"draw the core figures on js (--core-metric js), or pass --rescale-thresholds to carry "
        f"each threshold to {metric} at the same quantile of the token table."
    )


def _on_metric(value: float | tuple[float, ...], inputs: PlotInputs, metric: str) -> Any:
    """A JS threshold (or a tuple of them) as it applies to `metric`."""
    if metric in JS_METRICS:
        return value
    values = value if isinstance(value, tuple) else (value,)
    carried = tuple(match.value for match in inputs.carried(values, metric))
    return carried if isinstance(value, tuple) else carried[0]


FIGURES: dict[str, FigureSpec] = {
    spec.name: spec
    for spec in (
        _table_figure(
            "divergence_histogram", "tokens", "core",
            "Histogram of per-token {metric} over log-spaced bins (Fig. 2, left); exact zeros are "
            "counted in the note.",
            figures.divergence_histogram,
        ),
        _table_figure(
            "percentile_curve", "tokens", "core",
            "{metric} at each percentile of tokens, log scale (Fig. 2, right): on JS near zero "
            "for most tokens, rising only in the top few percent.",
            figures.percentile_curve,
        ),
        _table_figure(
            "positional_profile", "tokens", "core",
            "Mean, median and percentile bands of {metric} over relative position t/T (Fig. 3).",
            figures.positional_profile,
        ),
        _table_figure(
            "entropy_by_divergence", "tokens", "core",
            "KDEs of base and RL entropy at low- and high-divergence tokens, medians dashed "
            "(Fig. 4); KDEs " + SAMPLE_NOTE + ".",
            figures.entropy_by_divergence, js=("split",), max_samples="max_samples",
            seed="recovery.seed",
        ),
        _table_figure(
            "wordclouds", "tokens", "core",
            "Most frequent words among high- and low-divergence tokens (Fig. 5), laid out so that "
            "no two words overlap.",
            figures.wordclouds, js=("high", "low"),
        ),
        _table_figure(
            "token_trajectory", "tokens", "core",
            "Per-token {metric} along one response (the short response with the most divergent "
            "tokens), with its text and the divergent tokens highlighted (Fig. 1).",
            figures.token_trajectory, js=("threshold",),
        ),
        _table_figure(
            "topk_overlap", "tokens", "core",
            "Overlap of the base and RL top-k sets against k, per {metric} threshold (Fig. 9).",
            figures.topk_overlap, js=("thresholds",),
        ),
        _table_figure(
            "tail_promotion", "tokens", "core",
            "Base probability of the RL top-1 token at divergent positions (Fig. 10a/b); panel (b) "
            "shows a uniform sample of at most {points:,} positions drawn at random with seed "
            "{seed} (panel (a) counts every position).",
            figures.tail_promotion, js=("threshold",), max_samples="max_points",
            seed="recovery.seed",
        ),
        _table_figure(
            "rank_reordering", "tokens", "core",
            "Base-model rank of the RL top-1, -2 and -3 tokens at divergent positions (Fig. 22).",
            figures.rank_reordering, js=("threshold",),
        ),
        _table_figure(
            "token_profile", "tokens", "core",
            "Percentiles of {metric} for the three most frequent words beside all tokens (Fig. 23, "
            "where the paper profiles “the”).",
            figures.token_profile,
        ),
        _table_figure(
            "compare_sparsity", "compare", "core",
            "{metric} percentiles and near-zero shares of the labelled tables overlaid "
            "(Figs. 6, 12).",
            figures.compare_sparsity, js=("thresholds",),
        ),
        _table_figure(
            "compare_positional_profile", "compare", "core",
            "The positional profile of each labelled table, one panel each (Fig. 14): mean, "
            "median and percentile bands of {metric} over t/T.",
            figures.compare_positional_profile,
        ),
        _table_figure(
            "compare_entropy", "compare", "core",
            "KDEs of base and fine-tuned entropy at the high-divergence tokens of each labelled "
            "table, one panel each, medians dashed (Fig. 15); KDEs " + SAMPLE_NOTE + ".",
            figures.compare_entropy, js=("split",), max_samples="max_samples", seed="recovery.seed",
        ),
        _table_figure(
            "compare_topk_overlap", "compare", "core",
            "Overlap of the base and fine-tuned top-k sets against k at high-divergence tokens, "
            "one line per labelled table (Fig. 16).",
            figures.compare_topk_overlap, js=("threshold",),
        ),
        _table_figure(
            "compare_rank_reordering", "compare", "core",
            "Base-model rank of the fine-tuned top-1, -2 and -3 tokens at divergent positions, one "
            "panel per labelled table (Fig. 17).",
            figures.compare_rank_reordering, js=("threshold",),
        ),
        _table_figure(
            "compare_tail_promotion", "compare", "core",
            "Share of divergent positions whose fine-tuned top-1 token has base probability below "
            "x, one curve per labelled table (Fig. 18).",
            figures.compare_tail_promotion, js=("threshold",),
        ),
        _table_figure(
            "evolution", "evolution", "core",
            "{metric} percentiles, divergent share and overlap with the final checkpoint's "
            "divergent positions over RL training (Fig. 11a/b).",
            figures.evolution, js=("threshold",), note=_evolution_note,
        ),
        _table_figure(
            "lorenz", "tokens", "takeover",
            "Lorenz curve of the {metric} mass with its Gini coefficient.",
            figures.lorenz,
        ),
        _table_figure(
            "early_density", "tokens", "takeover",
            "Where the top 1% most divergent tokens sit over relative position, beside all tokens: "
            "the early bias (also the core paper's Fig. 3).",
            figures.early_density,
        ),
        _table_figure(
            "failure_roc", "tokens", "takeover",
            "ROC of each response's top-100 mean {metric} for flagging wrong answers, against base "
            "entropy, with problem-bootstrap AUROC intervals.",
            figures.failure_roc, n_boot="recovery.n_boot", seed="recovery.seed",
        ),
        FigureSpec(
            "cross_sampling_curves", "cross_sample", "core",
            "Accuracy (or pass@k with --recovery-at) against the intervention budget, forward and "
            "reverse, with the base control and the reference matched to each sampling and the "
            "random-position baseline (Figs. 7, 8).",
            lambda i: figures.cross_sampling_curves(
                i.cross_sample, reference=i.reference, recovery_at=i.recovery.recovery_at,
                n_boot=i.recovery.n_boot, seed=i.recovery.seed,
            ),
        ),
        FigureSpec(
            "takeover_knee", "cross_sample", "takeover",
            "Pass@k (with --recovery-at; accuracy otherwise; the per-benchmark average with "
            "several benchmarks) of the gated takeover against the mean per-response takeover "
            "rate ρ̄, one point per setting (per calibration rate r), the knee starred; the "
            "dashed lines: the base model and the guide model (without --reference; the paper's "
            "is a same-size thinking model).",
            lambda i: figures.takeover_knee(
                i.cross_sample, reference=i.reference, recovery_at=i.recovery.recovery_at,
                n_boot=i.recovery.n_boot, seed=i.recovery.seed,
            ),
        ),
        FigureSpec(
            "threshold_sensitivity", "cross_sample", "core",
            "Effective switches as a share of all switches, under the coupled and an independent "
            "draw of the primary model, and accuracy, against the switch threshold ε (the "
            "threshold sweep of Table 1).",
            lambda i: figures.threshold_sensitivity(i.cross_sample),
        ),
        FigureSpec(
            "threshold_recovery", "cross_sample", "core",
            "Recovery of the gain against the intervention budget, forward and reverse, one "
            "curve per switch threshold ε, with problem-bootstrap bands.",
            lambda i: figures.threshold_recovery(
                i.cross_sample, reference=i.reference, recovery_at=i.recovery.recovery_at,
                n_boot=i.recovery.n_boot, seed=i.recovery.seed,
            ),
        ),
        FigureSpec(
            "token_pairs", "cross_sample", "core",
            "The most frequent swaps at effective switches: the primary model's own draw and the "
            "intervening model's token (Fig. 52).",
            lambda i: figures.token_pairs(i.cross_sample),
        ),
        FigureSpec(
            "delta_alignment", "cross_sample", "rast",
            "Cosine between the small pair's logit delta (rast_rl − rast_base) and the large "
            "pair's (rl − base) over relative position along each setting's decoded responses "
            "(`--delta-alignment`; RAST's Fig. 4 measures it on RL trajectories), with each "
            "setting's mean over responses and 95% problem-bootstrap interval.",
            lambda i: figures.delta_alignment(
                i.cross_sample, n_boot=i.recovery.n_boot, seed=i.recovery.seed
            ),
        ),
    )
}  # fmt: skip

MISSING_INPUT: dict[Need, str] = {
    "tokens": "no token table",
    "compare": "needs --compare OTHER (another token table, e.g. the SFT control)",
    "evolution": "needs --evolution with token tables of at least two RL checkpoints",
    "cross_sample": "needs --cross-sample RESULTS (divscope cross-sample output)",
}


@dataclass(frozen=True)
class PlotReport:
    """What `write_figures` wrote and what it skipped."""

    out: Path
    """The output directory."""
    written: dict[str, list[Path]]
    """Figure name -> its files, in the gallery's order."""
    skipped: dict[str, str]
    """Figure name -> why it was not drawn."""


def check_names(names: Sequence[str] | None) -> list[str]:
    """The figures to draw: all by default; unknown names raise a `DivscopeError`."""
    if not names:
        return list(FIGURES)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise DivscopeError(
            f"unknown figure(s) {', '.join(map(repr, unknown))}; choose from {', '.join(FIGURES)}."
        )
    return list(dict.fromkeys(names))


def check_formats(formats: Sequence[str]) -> list[str]:
    """The output formats, lowercased; unknown ones raise a `DivscopeError`."""
    chosen = [f.strip().lower().lstrip(".") for f in formats if f.strip()]
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise DivscopeError(
            f"unknown format(s) {', '.join(map(repr, unknown)) or '(none)'}; choose from "
            f"{', '.join(FORMATS)}."
        )
    return list(dict.fromkeys(chosen))


def check_out(out: str | os.PathLike, *, overwrite: bool) -> Path:
    """The output directory, after checking that it is free or may be replaced."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise DivscopeError(f"{out}: output exists; pass --overwrite to replace it.")
    return out


def _missing(spec: FigureSpec, inputs: PlotInputs) -> str | None:
    present = {
        "tokens": inputs.tokens is not None,
        "compare": bool(inputs.compare),
        "evolution": len(inputs.evolution) >= 2,
        "cross_sample": inputs.cross_sample is not None,
    }
    return None if present[spec.needs] else MISSING_INPUT[spec.needs]


def write_figures(
    inputs: PlotInputs,
    out: str | os.PathLike,
    *,
    names: Sequence[str] | None = None,
    formats: Sequence[str] = ("png", "pdf"),
    overwrite: bool = False,
    title: str = "divscope figures",
    description: str = "",
    on_figure: Callable[[str, str | None], None] | None = None,
) -> PlotReport:
    """Draw every requested figure the inputs allow and write it, plus `index.md`, to `out`.

    A figure whose input is missing, whose JS thresholds would apply to a non-JS core metric
    without `inputs.metrics.rescale_thresholds`, or whose analysis raises a `DivscopeError` (e.g. an
    ungraded table for `failure_roc`), is skipped with the reason. `index.md` lists the figures
    under one heading per paper (section), each naming the section's metric.

    Args:
        inputs: the data.
        out: the output directory; replaced only with `overwrite`.
        names: figures to draw (default all of `FIGURES`).
        formats: file formats among png, pdf, svg.
        overwrite: replace an existing non-empty `out`.
        title: heading of `index.md`.
        description: a paragraph under the heading (inputs, sizes).
        on_figure: called after each figure with its name and the skip reason (None if written).

    Returns:
        A `PlotReport`.

    Raises:
        DivscopeError: unknown names or formats, or `out` exists without `overwrite`.
    """
    chosen, kinds = check_names(names), check_formats(formats)
    out = check_out(out, overwrite=overwrite)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    written: dict[str, list[Path]] = {}
    skipped: dict[str, str] = {}
    try:
        for name, figure, reason in drawn_figures(inputs, chosen):
            if figure is not None:
                written[name] = [save_figure(figure, tmp / f"{name}.{kind}") for kind in kinds]
            else:
                skipped[name] = reason
            if on_figure is not None:
                on_figure(name, reason)
        index = _index(inputs, written, skipped, title=title, description=description)
        (tmp / "index.md").write_text(index)
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return PlotReport(
        out=out,
        written={n: [out / p.name for p in paths] for n, paths in written.items()},
        skipped=skipped,
    )


def drawn_figures(
    inputs: PlotInputs, names: Iterable[str]
) -> Iterator[tuple[str, Figure | None, str | None]]:
    """Each of the figures `names` (in order) as `(name, figure, None)`, or `(name, None,
    reason)` when it cannot be drawn: an input it needs is missing, or drawing it raised a
    `DivscopeError` (its message is the reason). `divscope plot` and `divscope report` both
    draw the gallery through this."""
    for name in names:
        spec = FIGURES[name]
        reason = _missing(spec, inputs)
        figure = None
        if reason is None:
            try:
                figure = spec.draw(inputs)
            except DivscopeError as error:
                reason = str(error).removeprefix(f"{name}: ")
        yield name, figure, reason


def save_figure(
    figure: Figure, target: Path | BinaryIO, *, dpi: int = PNG_DPI, **options: Any
) -> Any:
    """Save `figure` to a path or a binary buffer (`options`: e.g. `format="png"`); returns
    `target`."""
    # A tight box is a safety net: constrained layout already keeps every label inside.
    figure.savefig(target, dpi=dpi, bbox_inches="tight", pad_inches=0.03, **options)
    return target


def figure_caption(spec: FigureSpec, inputs: PlotInputs) -> str:
    metric = inputs.metric_of(spec.section)
    caption = spec.caption.format(
        metric=metric_symbol(metric),
        n=inputs.max_samples,
        points=inputs.max_points,
        seed=inputs.recovery.seed,
    )
    caption += population_caption(spec, inputs)
    note = spec.note(inputs) if spec.note is not None else None
    caption += f" {note}" if note else ""
    if spec.js_thresholds and metric not in JS_METRICS:
        carried = "; ".join(
            f"{m.threshold:g} → {m.value:.4g} ({m.share_above:.2%} of tokens above)"
            for m in inputs.carried(spec.js_thresholds, metric)
        )
        caption += (
            f" Its JS thresholds carried to {metric_symbol(metric)} at the same quantile of the "
            f"token table: {carried}."
        )
    return caption


def population_caption(spec: FigureSpec, inputs: PlotInputs) -> str:
    """The trajectories a figure of token tables is drawn on, as a caption's last sentence;
    empty for the figures of cross-sample results.

    >>> import polars as pl
    >>> inputs = PlotInputs(pl.DataFrame({"prompt_id": ["a", "b"], "sample_id": [0, 0],
    ...     "position": [0, 0], "source": ["base", "rl"]}))
    >>> population_caption(FIGURES["lorenz"], inputs)
    ' On base rollouts: 1 response, 1 tokens.'
    """
    if spec.needs == "cross_sample":
        return ""
    used = inputs.population(spec.section)[1]
    if spec.needs == "tokens":
        return f" {used.text[0].upper()}{used.text[1:]}."
    compared, steps = inputs.companions()
    sides = compared if spec.needs == "compare" else {f"step {s}": v for s, v in steps.items()}
    listed = "; ".join(f"{name} {other.text}" for name, (_, other) in sides.items())
    return f" {inputs.label} {used.text}; {listed}."


def _population_lines(inputs: PlotInputs, section: Section) -> list[str]:
    """The population of a section's figures of the token table, for `index.md`; none for a
    section whose figures read only cross-sample results (RAST's)."""
    if all(spec.needs == "cross_sample" for spec in FIGURES.values() if spec.section == section):
        return []
    used = inputs.population(section)[1]
    line = f"The figures of the token table are drawn {used.text}."
    return [line if used.note is None else f"{line} Note: {used.note}.", ""]


def _index(
    inputs: PlotInputs,
    written: Mapping[str, list[Path]],
    skipped: Mapping[str, str],
    *,
    title: str,
    description: str,
) -> str:
    lines = [f"# {title}", ""]
    if description:
        lines += [description, ""]
    for section, heading in SECTIONS.items():
        metric = f", on `{inputs.metric_of(section)}`" if section != "rast" else ""
        lines += [f"## {heading}{metric}", "", *_population_lines(inputs, section)]
        names = [name for name in written if FIGURES[name].section == section]
        if not names:
            lines += ["No figure of this paper was drawn (see Skipped).", ""]
        for name in names:
            paths = written[name]
            links = " · ".join(f"[{p.suffix[1:]}]({p.name})" for p in paths)
            lines += [f"### {name}", "", figure_caption(FIGURES[name], inputs), "", links, ""]
            png = next((p for p in paths if p.suffix == ".png"), None)
            if png is not None:
                lines += [f"![{name}]({png.name})", ""]
    if skipped:
        lines += ["## Skipped", ""]
        lines += [f"- `{name}`: {reason}" for name, reason in skipped.items()]
        lines.append("")
    return "\n".join(lines)


def token_columns(*metrics: str) -> list[str]:
    """The token-table columns the figures read (loaded once, shared by every figure): those of
    `divscope analyze` and each divergence column a section draws on.

    >>> token_columns("js", "ce_base_rl")[-2:]
    ['js', 'ce_base_rl']
    """
    return list(dict.fromkeys([*SUMMARY_COLUMNS, *metrics]))
