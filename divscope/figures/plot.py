"""`plot`: token tables and cross-sample results in, a directory of figures out.

What `divscope plot` runs: check the figure names, formats and output first, read the tables,
and draw every figure they allow with `gallery.write_figures`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from divscope.analyses.summary import JS_METRICS, section_metrics
from divscope.defaults import CORE_METRIC, FORMATS, N_BOOT, SEED, TAKEOVER_METRIC
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


def evolution_steps(specs: Sequence[str]) -> dict[int, Path]:
    """Training step -> token table, from `STEP=PATH` or a path whose name ends in the step.

    >>> evolution_steps(["runs/rl-step-40.parquet", "100=final.parquet"])
    {40: PosixPath('runs/rl-step-40.parquet'), 100: PosixPath('final.parquet')}
    """
    steps: dict[int, Path] = {}
    for spec in specs:
        step_text, separator, path_text = spec.partition("=")
        if separator and step_text.strip().isdigit():
            step, path = int(step_text), Path(path_text)
        else:
            path = Path(spec)
            match = re.search(r"(\d+)$", path.stem)
            if match is None:
                raise DivscopeError(
                    f"--evolution {spec}: cannot tell the training step; name the table after "
                    "its step (e.g. rl-step-100.parquet) or pass STEP=PATH (e.g. 100=rl.parquet)."
                )
            step = int(match.group(1))
        if step in steps:
            raise DivscopeError(f"--evolution: step {step} given twice ({steps[step]}, {path}).")
        steps[step] = path
    return steps


def plot(
    tokens: str | os.PathLike,
    out: str | os.PathLike,
    *,
    cross_sample: str | os.PathLike | None = None,
    reference: str | os.PathLike | None = None,
    recovery_at: int | None = None,
    compare: Mapping[str, str | os.PathLike] | None = None,
    evolution: Mapping[int, str | os.PathLike] | None = None,
    names: Sequence[str] | None = None,
    formats: Sequence[str] = FORMATS,
    metric: str | None = None,
    core_metric: str = CORE_METRIC,
    takeover_metric: str = TAKEOVER_METRIC,
    rescale_thresholds: bool = False,
    seed: int = SEED,
    n_boot: int = N_BOOT,
    overwrite: bool = False,
    on_figure: Callable[[str, str | None], None] | None = None,
) -> PlotReport:
    """Draw every figure the tables allow into a directory, with an `index.md`.

    File to file: the token table's needed columns are read once into memory; the other tables are
    scanned lazily by the analyses that use them. Each figure is drawn on its paper's metric (see
    `divscope.figures.gallery`): the core paper's on `core_metric`, the takeover paper's on
    `takeover_metric`.

    Args:
        tokens: token table (a .parquet file or a directory of parts).
        out: output directory.
        cross_sample: cross-sample results (Parquet or JSONL).
        reference: the upper bound of recovery in the cross-sample figures: an existing file of
            graded responses of a third model, else a policy label of the results; default the
            matched `rl` control.
        recovery_at: recovery on pass@k at this k instead of mean@n.
        compare: label -> another token table.
        evolution: training step -> token table of that checkpoint.
        names: figures to draw (default all).
        formats: file formats among png, pdf, svg.
        metric: the divergence column of both sections; overrides `core_metric` and
            `takeover_metric` when given.
        core_metric: the core paper's figures' column.
        takeover_metric: the takeover paper's figures' column.
        rescale_thresholds: carry the core figures' JS thresholds to a non-JS core metric at
            the same quantile instead of skipping those figures.
        seed: seed of every sample and bootstrap.
        n_boot: bootstrap resamples.
        overwrite: replace an existing output directory.
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
    from divscope.io import read_reference, read_table, scan_token_table, table_name

    # Cheap checks first, so that a typo fails before the tables are read (write_figures
    # checks again).
    check_names(names)
    check_formats(formats)
    check_out(out, overwrite=overwrite)
    if cross_sample is None and (reference is not None or recovery_at is not None):
        raise DivscopeError(
            "--reference and --recovery-at set the recovery of the cross-sample figures; give "
            "the cross-sample results with --cross-sample."
        )
    core, takeover = section_metrics(metric, core_metric, takeover_metric)
    carried = rescale_thresholds and core not in JS_METRICS
    columns = token_columns(core, takeover, *(["js"] if carried else []))
    frame = scan_token_table(tokens).select(columns).collect(engine="streaming")
    inputs = PlotInputs(
        tokens=frame,
        label=table_name(tokens),
        compare={name: scan_token_table(path) for name, path in (compare or {}).items()},
        evolution={step: scan_token_table(path) for step, path in (evolution or {}).items()},
        cross_sample=read_table(cross_sample) if cross_sample is not None else None,
        core_metric=core,
        takeover_metric=takeover,
        rescale_thresholds=rescale_thresholds,
        recovery_at=recovery_at,
        reference=read_reference(reference),
        seed=seed,
        n_boot=n_boot,
    )
    description = (
        f"Token table `{tokens}`: {frame.height:,} tokens; the core paper's figures on `{core}`"
        + (" (JS thresholds carried at equal quantiles)" if carried else "")
        + f", the takeover paper's on `{takeover}`; seed {seed}."
        + (f" Cross-sample results `{cross_sample}`." if cross_sample is not None else "")
    )
    return write_figures(
        inputs,
        out,
        names=names,
        formats=formats,
        overwrite=overwrite,
        description=description,
        on_figure=on_figure,
    )
