"""`plot`: token tables and cross-sample results in, a directory of figures out.

What `divscope plot` runs: check the figure names, formats and output first, read the tables,
and draw every figure they allow with `gallery.write_figures`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import polars as pl

from divscope.analyses._streaming import collect, memory_cap
from divscope.analyses.populations import with_source
from divscope.analyses.study import Study
from divscope.analyses.summary import Metrics
from divscope.defaults import FORMATS
from divscope.errors import DivscopeError
from divscope.figures.gallery import (
    PlotInputs,
    PlotReport,
    check_formats,
    check_names,
    check_out,
    token_columns,
    write_figures,
)
from divscope.params import LIBRARY_ONLY, Flag, Output, Recovery


def formats_of(text: str) -> tuple[str, ...]:
    """The formats of a comma-separated --format value.

    >>> formats_of("png,svg")
    ('png', 'svg')
    """
    return tuple(text.split(","))


def plot(
    study: Annotated[Study, Flag(omit=("prompts", "system_prompt"))],
    out: Output,
    # No figure counts planning words: --planning-words is analyze's and report's.
    metrics: Annotated[Metrics, Flag(omit=("planning_words",))] = Metrics(),  # noqa: B008
    recovery: Recovery = Recovery(),  # noqa: B008 (frozen, hashable)
    names: Annotated[tuple[str, ...], Flag("--figure")] = (),
    formats: Annotated[tuple[str, ...], Flag("--format", parse=formats_of)] = FORMATS,
    *,
    on_figure: Annotated[Callable[[str, str | None], None] | None, LIBRARY_ONLY] = None,
) -> PlotReport:
    """Draw every figure the tables allow into a directory, with an `index.md`.

    From TOKENS, and --cross-sample, --compare and --evolution, into --out: every figure the
    inputs allow, says which it skipped and why, and writes index.md last, the figures under one
    heading per paper; the directory appears only when complete. The core paper's figures are
    drawn on js and the RL model's trajectories, the takeover paper's (Lorenz, early density,
    failure ROC, takeover knee) on ce_base_rl and base rollouts; with --compare, the SFT-vs-RL
    side-by-side figures too. Figures that show raw values (KDEs, scatter) draw a seeded random
    sample and say so.

    File to file: every table is scanned lazily (one file or a directory of parts) and each
    figure's analyses read it with polars' streaming engine, holding aggregates, never the
    table: memory stays flat in the number of rows. The figures that show raw values (the
    entropy KDEs, the scatter of tail promotion) draw a seeded uniform sample of at most
    `PlotInputs.max_samples` / `max_points` rows, and the token trajectory reads one response.
    `metrics.max_memory` (--max-memory) caps what the analyses hold (`memory_cap`).
    Each figure is drawn on its paper's metric and population (see `divscope.figures.gallery`):
    the core paper's on `metrics.core_metric` and the RL model's trajectories, the takeover
    paper's on `metrics.takeover_metric` and base rollouts (`metrics.population` overrides;
    where a population is absent, on what is there, said in the captions).

    Args:
        study: the token table and what it is read with (`Study`; a path: the token table
            alone): the --compare tables, the --evolution checkpoints, the cross-sample results
            and the reference of their recovery.
        out: the output directory (`Output`; a path: without overwrite).
        metrics: each section's divergence column and population (`Metrics`); with
            `rescale_thresholds`, the core figures' JS thresholds are carried to a non-JS core
            metric at the same quantile instead of those figures being skipped.
        recovery: how recovery and every interval are estimated (`Recovery`); its seed also
            draws the figures' samples.
        names: Draw only this figure (repeat); default (empty): all. A wrong name lists the choices.
        formats: Comma-separated file formats: png, pdf, svg.
        on_figure: progress callback, see `write_figures`.

    Returns:
        A `PlotReport`: the files written per figure and why the others were skipped.

    Raises:
        DivscopeError: unknown names or formats, an existing `out` without `overwrite`, a
            table that cannot be read, or `reference`/`recovery_at` without `cross_sample`.

    Example (`lab_tokens`: the token table of the lab's first 8 trajectories, see conftest.py):
        >>> import tempfile
        >>> import divscope
        >>> tmp = tempfile.TemporaryDirectory()
        >>> report = divscope.plot(
        ...     lab_tokens, f"{tmp.name}/figures", names=["lorenz", "percentile_curve"])
        >>> sorted(report.written), report.written["lorenz"][0].name
        (['lorenz', 'percentile_curve'], 'lorenz.png')
        >>> tmp.cleanup()
    """
    study, out = Study.of(study), Output.of(out)
    # Cheap checks first, so that a typo fails before the tables are read (write_figures
    # checks again).
    names = tuple(names) or None
    check_names(names)
    check_formats(formats)
    check_out(out.path, overwrite=out.overwrite)
    if study.cross_sample is None and (
        study.reference is not None or recovery.recovery_at is not None
    ):
        raise DivscopeError(
            "--reference and --recovery-at set the recovery of the cross-sample figures; give "
            "the cross-sample results with --cross-sample."
        )
    core, takeover = metrics.sections
    columns = token_columns(core, takeover, *(["js"] if metrics.carried else []))
    tables = study.tables
    tokens = with_source(tables.tokens).select([*columns, "source"])
    inputs = PlotInputs(
        tokens=tokens,
        label=study.name,
        compare=tables.compare,
        evolution=tables.evolution,
        cross_sample=tables.cross_sample,
        reference=tables.reference,
        metrics=metrics,
        recovery=recovery,
        roles=tables.roles,
    )
    inputs.population("core")  # a --population naming what the table lacks fails here
    n_tokens = collect(tokens.select(pl.len())).item()
    steps = study.steps
    last = " (the last training step's)" if steps and study.tokens == steps[max(steps)] else ""
    description = (
        f"Token table `{study.tokens}`{last}: {n_tokens:,} tokens; the core paper's figures on "
        f"`{core}`"
        + (" (JS thresholds carried at equal quantiles)" if metrics.carried else "")
        + f", the takeover paper's on `{takeover}`; seed {recovery.seed}."
        + (f" Cross-sample results `{study.cross_sample}`." if study.cross_sample else "")
    )
    with memory_cap(metrics.max_memory):
        return write_figures(
            inputs,
            out.path,
            names=names,
            formats=formats,
            overwrite=out.overwrite,
            description=description,
            on_figure=on_figure,
        )
