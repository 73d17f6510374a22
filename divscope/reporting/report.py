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
from typing import Annotated, Any

from divscope.analyses.study import Study
from divscope.analyses.summary import Metrics
from divscope.defaults import REPORT_RESPONSES
from divscope.errors import DivscopeError
from divscope.params import LIBRARY_ONLY, Flag, Output, Recovery

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
    tokens: str | os.PathLike, tokenizer: str | os.PathLike | Any | None
) -> tuple[Callable[[int], str] | None, str | None]:
    """The readable text of a token id, from `tokenizer` or the token table's base model, and a
    note when there is none.

    `tokenizer` (a directory, or in Python a tokenizer already loaded) wins when given;
    otherwise the base model of the table's metadata (`models.base`) when it is a local
    directory that exists. Ids beyond the tokenizer's vocabulary read `id N`.
    """
    from divscope.io import read_metadata

    source: str | None = None
    loaded = tokenizer if not isinstance(tokenizer, str | os.PathLike | None) else None
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

    pieces = TokenPieces(loaded if loaded is not None else load_tokenizer(source))
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
    study: Annotated[Study, Flag(omit=("prompts", "system_prompt"))],
    out: Output,
    metrics: Metrics = Metrics(),  # noqa: B008 (frozen, hashable)
    recovery: Recovery = Recovery(),  # noqa: B008 (frozen, hashable)
    *,
    responses: Annotated[int, Flag(min=1)] = REPORT_RESPONSES,
    tokenizer: Path | None = None,
    progress: Annotated[bool, LIBRARY_ONLY] = True,
) -> ReportSummary:
    """Write one self-contained HTML report of a token table: summary, figures, token viewer.

    Of TOKENS, and --cross-sample, --compare and --evolution. The page holds the summary tables of
    both papers' sections, the cross-sampling table with --cross-sample, every figure
    `divscope plot` can draw from the inputs (embedded), and a token viewer of --responses
    responses coloured by js, ce_base_rl, kl_base_rl or entropy_base. It needs no network: send
    the one file.

    The summary is `divscope analyze`'s and the figures `divscope plot`'s for the same study,
    metrics and recovery (PNG embedded); the viewer holds the most divergent half of the
    responses (largest `js`) and a random sample of the others drawn with the recovery's seed.
    Nothing in it refers to a URL: it opens offline from disk. The token table is scanned
    lazily, never read whole: the summary, the figures and the viewer stream it (the viewer
    reads only its responses' rows), so memory stays flat in the number of rows and under
    --max-memory (`metrics.max_memory`).

    Args:
        study: the token table and what it is read with (`Study`; a path: the token table
            alone).
        out: the HTML file (`Output`; a path: without overwrite), written atomically.
        metrics: each section's divergence column and population (`Metrics`).
        recovery: how recovery and every interval are estimated (`Recovery`); its seed also
            draws the viewer's and the figures' samples.
        responses: Responses embedded in the token viewer: the most divergent half (max js) and
            a seeded random sample of the others.
        tokenizer: Tokenizer (a local model directory) that decodes the models' top-1 tokens;
            default: the table's base model when it is a local directory.
        progress: print a `note:` line per figure on stderr.

    Returns:
        A `ReportSummary`.

    Raises:
        DivscopeError: an existing `out` without `overwrite`, `responses` < 1, a table that
            cannot be read, or a tokenizer that cannot be loaded.

    Example (`lab_tokens`: the token table of the lab's first 8 trajectories, see conftest.py):
        >>> import tempfile
        >>> import divscope
        >>> from divscope.params import Recovery
        >>> tmp = tempfile.TemporaryDirectory()
        >>> result = divscope.report(lab_tokens, f"{tmp.name}/report.html",
        ...     recovery=Recovery(n_boot=50), responses=4, progress=False)
        >>> result.n_responses, result.out.name
        (4, 'report.html')
        >>> tmp.cleanup()
    """
    from divscope.analyses._streaming import memory_cap
    from divscope.analyses.populations import with_source
    from divscope.analyses.summary import summary
    from divscope.figures.gallery import PlotInputs, token_columns
    from divscope.output import check_target, write_atomically
    from divscope.progress import note
    from divscope.reporting import data, page

    study, output = Study.of(study), Output.of(out)
    out = check_target(output.path, overwrite=output.overwrite)
    if responses < 1:
        raise DivscopeError(f"--responses {responses}: embed at least one response.")
    tokens, seed = study.tokens, recovery.seed
    decode, decode_note = decoder(tokens, tokenizer)
    core, takeover = metrics.sections
    metric_columns = token_columns(core, takeover, *(["js"] if metrics.carried else []))
    columns = list(dict.fromkeys([*metric_columns, *data.VIEWER_COLUMNS]))
    tables = study.tables
    # Scanned, never read whole: every analysis, figure and the viewer stream it.
    table = with_source(tables.tokens).select([*columns, "source"])
    label = study.name
    result = summary(
        table,
        metrics,
        recovery,
        label=label,
        compare_with=tables.compare,
        cross_sample=tables.cross_sample,
        reference=tables.reference,
        roles=tables.roles,
    )
    inputs = PlotInputs(
        tokens=table,
        label=label,
        compare=tables.compare,
        evolution=tables.evolution,
        cross_sample=tables.cross_sample,
        reference=tables.reference,
        metrics=metrics,
        recovery=recovery,
        roles=tables.roles,
    )

    def drawn(name: str, reason: str | None) -> None:
        note(
            f"figure {name}" + ("" if reason is None else f": skipped, {reason}"), enabled=progress
        )

    with memory_cap(metrics.max_memory):
        figures, skipped = draw_figures(inputs, on_figure=drawn)
        document = data.viewer_document(table, responses=responses, seed=seed, decode=decode)
    cross_sample = study.cross_sample
    listed = {"token table": str(tokens)}
    listed |= {"cross-sample results": str(cross_sample)} if cross_sample is not None else {}
    listed |= {f"compare: {name}": str(path) for name, path in study.compared.items()}
    listed |= {f"evolution: step {s}": str(p) for s, p in sorted(study.steps.items())}
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
