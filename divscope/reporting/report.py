"""`report`: a token table (and optional cross-sample results, comparisons, checkpoints) in, one
self-contained HTML file out.

What `divscope report` runs: the summary of `divscope analyze` (both papers' sections, and the
cross-sampling report with --cross-sample), every figure `divscope plot` can draw from the
inputs as an embedded PNG, and the token viewer's JSON document (`report.data`), put into one page
(`report.page`) and written atomically.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from divscope.defaults import CORE_METRIC, N_BOOT, REPORT_RESPONSES, SEED, TAKEOVER_METRIC
from divscope.errors import DivscopeError

FIGURE_DPI = 110
"""Resolution of the report's embedded PNG figures."""
TITLE = "divscope report"


@dataclass(frozen=True)
class ReportSummary:
    """What `report` wrote."""

    out: Path
    """The HTML file."""
    bytes: int
    """Its size."""
    n_responses: int
    """Responses embedded in the token viewer."""
    figures: tuple[str, ...]
    """The figures drawn, in the gallery's order."""
    skipped: Mapping[str, str]
    """Figure name -> why it was not drawn."""


def decoder(
    tokens: str | os.PathLike, tokenizer: str | os.PathLike | None
) -> tuple[Callable[[int], str] | None, str | None]:
    """The readable text of a token id, from `tokenizer` or the token table's base model, and a
    note when there is none.

    `tokenizer` wins when given; otherwise the base model of the table's metadata
    (`models.base`) when it is a local directory that exists. Ids beyond the tokenizer's
    vocabulary read `id N`.
    """
    from divscope.io import read_metadata

    source: str | None = None
    if tokenizer is not None:
        source = str(tokenizer)
    else:
        try:
            base = (read_metadata(tokens).get("models") or {}).get("base")
        except DivscopeError:
            base = None
        if isinstance(base, dict):  # {"name_or_path": ..., "revision": ..., ...}
            base = base.get("name_or_path")
        if base is not None and Path(base).is_dir():
            source = str(base)
        elif base is not None:
            return None, (
                f"Top-1 tokens are shown as ids: the base model {base!r} is not a local "
                "directory here; pass --tokenizer PATH to decode them."
            )
        else:
            return None, (
                "Top-1 tokens are shown as ids: the token table names no base model; pass "
                "--tokenizer PATH to decode them."
            )
    from divscope.models.tokenizers import load_tokenizer
    from divscope.vocab import TokenPieces

    pieces = TokenPieces(load_tokenizer(source))
    size = len(pieces.raw)

    def decode(token_id: int) -> str:
        return pieces([token_id])[0] if 0 <= token_id < size else f"id {token_id}"

    return decode, None


def draw_figures(
    inputs: Any, *, on_figure: Callable[[str, str | None], None] | None = None
) -> tuple[list[Any], dict[str, str]]:
    """Every figure of the gallery that `inputs` (a `PlotInputs`) allow, as in-memory PNGs.

    Returns:
        The drawn figures (`page.DrawnFigure`) and, for each other one, why it was skipped.
    """
    from divscope.figures.gallery import FIGURES, drawn_figures, figure_caption, save_figure
    from divscope.reporting.page import DrawnFigure

    drawn: list[DrawnFigure] = []
    skipped: dict[str, str] = {}
    for name, figure, reason in drawn_figures(inputs, FIGURES):
        if figure is not None:
            png = save_figure(figure, io.BytesIO(), dpi=FIGURE_DPI, format="png").getvalue()
            spec = FIGURES[name]
            drawn.append(DrawnFigure(name, spec.section, figure_caption(spec, inputs), png))
        else:
            skipped[name] = reason
        if on_figure is not None:
            on_figure(name, reason)
    return drawn, skipped


def report(
    tokens: str | os.PathLike,
    out: str | os.PathLike,
    *,
    cross_sample: str | os.PathLike | None = None,
    compare: Mapping[str, str | os.PathLike] | None = None,
    evolution: Mapping[int, str | os.PathLike] | None = None,
    responses: int = REPORT_RESPONSES,
    seed: int = SEED,
    tokenizer: str | os.PathLike | None = None,
    n_boot: int = N_BOOT,
    overwrite: bool = False,
    progress: bool = True,
) -> ReportSummary:
    """Write one self-contained HTML report of a token table: summary, figures, token viewer.

    The page holds the summary tables of both papers' sections (as `divscope analyze`), the
    cross-sampling table with `cross_sample`, every figure the inputs allow (as `divscope
    plot`, PNG embedded), and a token viewer of `responses` responses: the most divergent half
    (largest `js`) and a random sample of the others drawn with `seed`. Nothing in it refers to
    a URL: it opens offline from disk.

    Args:
        tokens: the token table (a .parquet file or a directory of parts).
        out: the HTML file, written atomically.
        cross_sample: cross-sample results (Parquet or JSONL).
        compare: label -> another token table on the same trajectories (e.g. the SFT control).
        evolution: training step -> token table of that RL checkpoint.
        responses: responses embedded in the viewer.
        seed: seed of the viewer's sample, of every bootstrap and of the figures' samples.
        tokenizer: tokenizer (a local model directory) decoding the top-1 tokens; default the
            base model of the table's metadata when it is a local directory.
        n_boot: bootstrap resamples of every interval.
        overwrite: replace an existing `out`.
        progress: print a `note:` line per figure on stderr.

    Returns:
        A `ReportSummary`.

    Raises:
        DivscopeError: an existing `out` without `overwrite`, `responses` < 1, a table that
            cannot be read, or a tokenizer that cannot be loaded.

    Example (`lab_tokens`: the token table of the lab's first 8 trajectories, see conftest.py):
        >>> import tempfile
        >>> import divscope
        >>> tmp = tempfile.TemporaryDirectory()
        >>> result = divscope.report(
        ...     lab_tokens, f"{tmp.name}/report.html", responses=4, n_boot=50, progress=False)
        >>> result.n_responses, result.out.name
        (4, 'report.html')
        >>> tmp.cleanup()
    """
    from divscope.analyses.summary import summary
    from divscope.figures.gallery import PlotInputs, token_columns
    from divscope.io import read_table, scan_token_table, table_name
    from divscope.output import check_target, write_atomically
    from divscope.progress import note
    from divscope.reporting import data, page

    out = check_target(out, overwrite=overwrite)
    if responses < 1:
        raise DivscopeError(f"--responses {responses}: embed at least one response.")
    decode, decode_note = decoder(tokens, tokenizer)
    metrics = token_columns(CORE_METRIC, TAKEOVER_METRIC)
    columns = list(dict.fromkeys([*metrics, *data.VIEWER_COLUMNS]))
    frame = scan_token_table(tokens).select(columns).collect(engine="streaming")
    label = table_name(tokens)
    compared = {name: scan_token_table(path) for name, path in (compare or {}).items()}
    results = read_table(cross_sample) if cross_sample is not None else None
    result = summary(
        frame, None, label=label, compare_with=compared, cross_sample=results,
        n_boot=n_boot, seed=seed,
    )  # fmt: skip
    inputs = PlotInputs(
        tokens=frame,
        label=label,
        compare=compared,
        evolution={step: scan_token_table(path) for step, path in (evolution or {}).items()},
        cross_sample=results,
        seed=seed,
        n_boot=n_boot,
    )

    def drawn(name: str, reason: str | None) -> None:
        note(
            f"figure {name}" + ("" if reason is None else f": skipped, {reason}"), enabled=progress
        )

    figures, skipped = draw_figures(inputs, on_figure=drawn)
    document = data.viewer_document(frame, responses=responses, seed=seed, decode=decode)
    listed = {"token table": str(tokens)}
    listed |= {"cross-sample results": str(cross_sample)} if cross_sample is not None else {}
    listed |= {f"compare: {name}": str(path) for name, path in (compare or {}).items()}
    listed |= {f"evolution: step {s}": str(p) for s, p in sorted((evolution or {}).items())}
    listed |= {"tokenizer": str(tokenizer)} if tokenizer is not None else {}
    created = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = page.header_html(
        TITLE, listed, created, document["included"], notes=[decode_note] if decode_note else []
    )
    text = page.page(
        title=f"{TITLE}: {label}",
        header=header,
        summary=page.summary_html(result),
        cross_sampling=page.cross_sampling_html(result),
        figures=page.figures_html(figures, skipped),
        data=data.embed_json(document),
    )
    encoded = text.encode("utf-8")
    write_atomically(out, lambda tmp: tmp.write_bytes(encoded))
    return ReportSummary(
        out=out,
        bytes=len(encoded),
        n_responses=len(document["responses"]),
        figures=tuple(f.name for f in figures),
        skipped=skipped,
    )
