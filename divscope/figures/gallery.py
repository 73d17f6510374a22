"""Every figure divscope can draw, and writing all that given inputs allow to a directory.

`FIGURES` names each figure, what it needs and its caption; `write_figures` draws them from
in-memory inputs (`divscope.plot`, in `figures.plot`, from files). The output directory is
written under a temporary name and renamed into place when complete, `index.md` last, so an
interrupted run never leaves a directory that looks finished.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from matplotlib.figure import Figure

from divscope import figures
from divscope.analyses._frames import Frame
from divscope.errors import DivscopeError
from divscope.figures.style import metric_symbol

Need = Literal["tokens", "compare", "evolution", "cross_sample"]
FORMATS: tuple[str, ...] = ("png", "pdf", "svg")
PNG_DPI = 200
SAMPLE_NOTE = "fitted on at most {n:,} tokens per group, drawn at random with seed {seed}"


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
    metric: str = "js"
    """The divergence column every figure uses."""
    seed: int = 0
    """Seed of every sample and bootstrap."""
    n_boot: int = 1000
    """Bootstrap resamples of every interval."""
    max_samples: int = 20_000
    """Tokens per group that the entropy KDEs are fitted on (a seeded sample beyond)."""
    max_points: int = 5_000
    """Points drawn in the scatter of `tail_promotion` (a seeded sample beyond)."""


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the gallery."""

    name: str
    """File stem and `--figure` name."""
    needs: Need
    """The input the figure cannot be drawn without."""
    caption: str
    """What the figure shows, for `index.md`; `{metric}`, `{n}`, `{points}` and `{seed}` are
    filled in from the inputs."""
    draw: Callable[[PlotInputs], Figure]
    """Draws the figure from the inputs."""


def _tokens(draw: Callable[..., Figure]) -> Callable[[PlotInputs], Figure]:
    return lambda inputs: draw(inputs.tokens, metric=inputs.metric)


FIGURES: dict[str, FigureSpec] = {
    spec.name: spec
    for spec in (
        FigureSpec(
            "divergence_histogram", "tokens",
            "Histogram of per-token {metric} over log-spaced bins (Fig. 2, left); exact zeros are "
            "counted in the note.",
            _tokens(figures.divergence_histogram),
        ),
        FigureSpec(
            "percentile_curve", "tokens",
            "{metric} at each percentile of tokens, log scale (Fig. 2, right): near zero for most "
            "tokens, rising only in the top few percent.",
            _tokens(figures.percentile_curve),
        ),
        FigureSpec(
            "lorenz", "tokens",
            "Lorenz curve of the {metric} mass with its Gini coefficient (takeover paper).",
            _tokens(figures.lorenz),
        ),
        FigureSpec(
            "positional_profile", "tokens",
            "Mean, median and percentile bands of {metric} over relative position t/T (Fig. 3).",
            _tokens(figures.positional_profile),
        ),
        FigureSpec(
            "early_density", "tokens",
            "Where the top 1% most divergent tokens sit over relative position, beside all tokens "
            "(Fig. 3).",
            _tokens(figures.early_density),
        ),
        FigureSpec(
            "entropy_by_divergence", "tokens",
            "KDEs of base and RL entropy at low- and high-divergence tokens, medians dashed "
            "(Fig. 4); KDEs " + SAMPLE_NOTE + ".",
            lambda i: figures.entropy_by_divergence(
                i.tokens, metric=i.metric, max_samples=i.max_samples, seed=i.seed
            ),
        ),
        FigureSpec(
            "wordclouds", "tokens",
            "Most frequent words among high- and low-divergence tokens (Fig. 5).",
            _tokens(figures.wordclouds),
        ),
        FigureSpec(
            "token_trajectory", "tokens",
            "Per-token {metric} along one response (the short response with the most divergent "
            "tokens), with its text and the divergent tokens highlighted (Fig. 1).",
            _tokens(figures.token_trajectory),
        ),
        FigureSpec(
            "topk_overlap", "tokens",
            "Overlap of the base and RL top-k sets against k, per {metric} threshold (Fig. 9).",
            _tokens(figures.topk_overlap),
        ),
        FigureSpec(
            "tail_promotion", "tokens",
            "Base probability of the RL top-1 token at divergent positions (Fig. 10a/b); panel (b) "
            "shows at most {points:,} positions drawn at random with seed {seed}.",
            lambda i: figures.tail_promotion(
                i.tokens, metric=i.metric, max_samples=i.max_points, seed=i.seed
            ),
        ),
        FigureSpec(
            "rank_reordering", "tokens",
            "Base-model rank of the RL top-1, -2 and -3 tokens at divergent positions (Fig. 22).",
            _tokens(figures.rank_reordering),
        ),
        FigureSpec(
            "token_profile", "tokens",
            "Percentiles of {metric} for the three most frequent words beside all tokens (Fig. 23, "
            "where the paper profiles “the”).",
            _tokens(figures.token_profile),
        ),
        FigureSpec(
            "failure_roc", "tokens",
            "ROC of each response's top-100 mean {metric} for flagging wrong answers, against base "
            "entropy, with problem-bootstrap AUROC intervals (takeover paper).",
            lambda i: figures.failure_roc(
                i.tokens, metric=i.metric, n_boot=i.n_boot, seed=i.seed
            ),
        ),
        FigureSpec(
            "compare_sparsity", "compare",
            "{metric} percentiles and near-zero shares of the labelled tables overlaid "
            "(Figs. 6, 12).",
            lambda i: figures.compare_sparsity(
                {i.label: i.tokens, **i.compare}, metric=i.metric
            ),
        ),
        FigureSpec(
            "evolution", "evolution",
            "{metric} percentiles, divergent share and overlap with the final checkpoint's "
            "divergent positions over RL training (Fig. 11a/b).",
            lambda i: figures.evolution(i.evolution, metric=i.metric),
        ),
        FigureSpec(
            "cross_sampling_curves", "cross_sample",
            "Accuracy against the intervention budget, forward and reverse, with the base and RL "
            "controls and the random-position baseline (Figs. 7, 8).",
            lambda i: figures.cross_sampling_curves(i.cross_sample, n_boot=i.n_boot, seed=i.seed),
        ),
        FigureSpec(
            "takeover_knee", "cross_sample",
            "Accuracy against the share of taken-over tokens of the gated takeover, the knee "
            "starred (takeover paper).",
            lambda i: figures.takeover_knee(i.cross_sample, n_boot=i.n_boot, seed=i.seed),
        ),
    )
}  # fmt: skip

MISSING_INPUT: dict[Need, str] = {
    "tokens": "no token table",
    "compare": "needs --compare OTHER (another token table, e.g. the SFT control)",
    "evolution": "needs --evolution with token tables of at least two RL checkpoints",
    "cross_sample": "needs --xs RESULTS (divscope cross-sample output)",
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

    A figure whose input is missing, or whose analysis raises a `DivscopeError` (e.g. an
    ungraded table for `failure_roc`), is skipped with the reason.

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
        for name in chosen:
            spec = FIGURES[name]
            reason = _missing(spec, inputs)
            if reason is None:
                try:
                    figure = spec.draw(inputs)
                except DivscopeError as error:
                    reason = str(error).removeprefix(f"{name}: ")
                else:
                    written[name] = [_save(figure, tmp / f"{name}.{kind}") for kind in kinds]
            if reason is not None:
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


def _save(figure: Figure, path: Path) -> Path:
    # A tight box is a safety net: constrained layout already keeps every label inside.
    figure.savefig(path, dpi=PNG_DPI, bbox_inches="tight", pad_inches=0.03)
    return path


def _caption(spec: FigureSpec, inputs: PlotInputs) -> str:
    return spec.caption.format(
        metric=metric_symbol(inputs.metric),
        n=inputs.max_samples,
        points=inputs.max_points,
        seed=inputs.seed,
    )


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
    for name, paths in written.items():
        links = " · ".join(f"[{p.suffix[1:]}]({p.name})" for p in paths)
        lines += [f"## {name}", "", _caption(FIGURES[name], inputs), "", links, ""]
        png = next((p for p in paths if p.suffix == ".png"), None)
        if png is not None:
            lines += [f"![{name}]({png.name})", ""]
    if skipped:
        lines += ["## Skipped", ""]
        lines += [f"- `{name}`: {reason}" for name, reason in skipped.items()]
        lines.append("")
    return "\n".join(lines)
