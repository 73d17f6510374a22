"""The report's HTML: the template of `assets/` filled with the rendered sections.

Each `*_html` function renders one part of the page from analysis results (no statistics of
its own): the header, the summary tables of both papers' sections, the cross-sampling table
and the figures; `page` puts them, the viewer's embedded JSON, `viewer.js` and the style
sheets (`viewer.css`, `report.css`) into the template. Every text is HTML-escaped; nothing
refers to a URL outside the file.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from divscope.analyses.summary import Summary, to_jsonable
from divscope.errors import DivscopeError

ASSETS = "assets"
"""The folder of `divscope.reporting` holding the template, the script and the style sheets."""
STYLE = ("viewer.css", "report.css")
"""The report's style sheets, inlined in this order: the token viewer's (which notebooks share,
`reporting.notebook`), then the page's."""
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
PLACEHOLDERS = ("title", "header", "summary", "cross_sampling", "figures", "data", "script",
                "style")  # fmt: skip


@dataclass(frozen=True)
class DrawnFigure:
    """One figure of the report: a PNG and what it shows."""

    name: str
    """The gallery's name of the figure."""
    section: str
    """The paper's section (`core`, `takeover`, `rast`)."""
    caption: str
    """The gallery's caption, filled in."""
    png: bytes
    """The PNG image."""


def asset(name: str) -> str:
    """The text of `divscope/reporting/assets/<name>` (shipped as package data)."""
    try:
        return resources.files("divscope.reporting").joinpath(ASSETS, name).read_text("utf-8")
    except FileNotFoundError as error:
        raise DivscopeError(
            f"divscope/reporting/{ASSETS}/{name}: missing from the installed package; reinstall "
            "divscope (pip install -e .)."
        ) from error


def escape(value: Any) -> str:
    """`value` as HTML text, quotes included."""
    return html.escape(str(value), quote=True)


def _number(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _is_interval(value: Any) -> bool:
    return isinstance(value, Mapping) and {"estimate", "low", "high"} <= value.keys()


def _cell(value: Any) -> str:
    """One table cell's HTML: an interval as `estimate [low, high]`, a list as its items."""
    if _is_interval(value):
        return escape(
            f"{_number(value['estimate'])} [{_number(value['low'])}, {_number(value['high'])}]"
        )
    if isinstance(value, Mapping):
        return _mapping_table(value)
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return _rows_table(value)
    if isinstance(value, list):
        return escape(", ".join(_number(v) for v in value))
    return escape(_number(value))


def _rows_table(rows: Sequence[Mapping[str, Any]], caption: str | None = None) -> str:
    """A list of row dicts (a frame's `to_jsonable`) as a `<table>`."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    head = "".join(f'<th scope="col">{escape(c)}</th>' for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(row.get(c))}</td>" for c in columns) + "</tr>" for row in rows
    )
    title = f"<caption>{escape(caption)}</caption>" if caption else ""
    return (
        f'<div class="table-wrap"><table>{title}<thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _mapping_table(mapping: Mapping[str, Any], caption: str | None = None) -> str:
    """A dict as a two-column `<table>` of names and values (tables nested in cells)."""
    body = "".join(
        f'<tr><th scope="row">{escape(k)}</th><td>{_cell(v)}</td></tr>' for k, v in mapping.items()
    )
    title = f"<caption>{escape(caption)}</caption>" if caption else ""
    return f'<div class="table-wrap"><table class="kv">{title}<tbody>{body}</tbody></table></div>'


def _section_html(name: str, section: Mapping[str, Any]) -> str:
    """One paper's section: its scalars and intervals in one table, each frame in its own;
    fields the inputs leave empty (no `--compare`, nothing rescaled) are left out."""
    paper = section.get("paper", name)
    metric = section.get("metric")
    on = f" <small>on <code>{escape(metric)}</code></small>" if metric else ""
    heading = escape(paper) + on
    section = dict(section)
    population = section.pop("population", None)
    sides = section.pop("comparison_populations", None) or {}
    scalars = {
        k: v
        for k, v in section.items()
        if k not in ("paper", "metric", "notes")
        and v is not None
        and not (isinstance(v, list) and v and all(isinstance(r, Mapping) for r in v))
        and not (isinstance(v, Mapping) and not _is_interval(v))
    }
    parts = [f'<h3 id="summary-{escape(name)}">{heading}</h3>']
    if population is not None:
        parts.append(f'<p class="population">{escape(_population_text(population))}</p>')
        if population["note"]:
            parts.append(f'<p class="note">Population: {escape(population["note"])}.</p>')
    for label, side in sides.items():
        parts.append(
            f'<p class="population">Comparison, {escape(label)}: '
            f"{escape(_population_text(side))}</p>"
        )
    if scalars:
        parts.append(_mapping_table(scalars))
    for key, value in section.items():
        if key in ("paper", "metric", "notes") or key in scalars or value is None:
            continue
        if isinstance(value, Mapping):
            parts.append(_mapping_table(value, caption=key.replace("_", " ")))
        elif value:
            parts.append(_rows_table(value, caption=key.replace("_", " ")))
    for note in section.get("notes") or ():
        parts.append(f'<p class="note">{escape(note)}</p>')
    return "\n".join(parts)


def _population_text(population: Mapping[str, Any]) -> str:
    """A section's population (its `to_jsonable` dict) in words: what it read and how much.

    >>> _population_text({"description": "base rollouts", "n_responses": 48, "n_tokens": 9000})
    'On base rollouts: 48 responses, 9,000 tokens.'
    """
    return (
        f"On {population['description']}: {population['n_responses']:,} responses, "
        f"{population['n_tokens']:,} tokens."
    )


def summary_html(result: Summary) -> str:
    """`<section id="summary">`: the sizes, then each paper's section (core, takeover, RAST) as
    tables, intervals written `estimate [low, high]` (95% bootstrap intervals)."""
    document = to_jsonable(result)
    sizes = (
        f"<p>{result.n_tokens:,} tokens, {result.n_responses:,} responses, "
        f"{result.n_prompts:,} prompts in the table; each section reads its paper's population "
        "(below its heading). Intervals: estimate [low, high], 95% bootstrap.</p>"
    )
    sections = [_section_html(name, document[name]) for name in ("core", "takeover", "rast")]
    return (
        '<section id="summary" aria-labelledby="summary-heading">\n'
        '<h2 id="summary-heading">Summary</h2>\n' + sizes + "\n" + "\n".join(sections) + "\n"
        "</section>"
    )


def cross_sampling_html(result: Summary) -> str:
    """`<section id="cross-sampling">`: the Table 1-style table of the cross-sample curve
    (policy, setting, budget, n, accuracy and recovery with 95% intervals, pooled over prompts
    and, with several benchmarks, per benchmark; switched and effective shares), what the
    takeover rows' recovery is against, and the takeover knee; empty without cross-sample
    results."""
    report = result.cross_sample
    if report is None:
        return ""
    from divscope.formatting import (
        budget_text,
        interval_text,
        knee_text,
        labelled,
        share_text,
    )

    curve = labelled(report.curve)
    coupled = "effective_coupled_share_pooled" in curve.columns
    macro = "recovery_macro" in curve.columns
    pooled = ", pooled" if macro else ""
    header = ["policy", "setting", "budget", "n", f"accuracy{pooled} [95% CI]"]
    header += [f"recovery{pooled} [95% CI]"]
    header += ["accuracy per benchmark", "recovery per benchmark"] if macro else []
    header += ["switched", "effective", *(["eff. coupled"] if coupled else [])]
    rows = []
    for row in curve.iter_rows(named=True):
        cells = [
            row["policy"], row["setting"] or "-", budget_text(row["budget"]),
            str(row["n_responses"]), interval_text(row, "accuracy"),
            interval_text(row, "recovery", percent=False),
        ]  # fmt: skip
        if macro:
            cells += [
                interval_text(row, "accuracy_macro"),
                interval_text(row, "recovery_macro", percent=False),
            ]
        cells += [
            share_text(row.get("switch_share_pooled")),
            share_text(row.get("effective_share_pooled")),
        ]
        if coupled:
            cells.append(share_text(row.get("effective_coupled_share_pooled")))
        rows.append(cells)
    measure = "mean@n" if report.recovery_at is None else f"pass@{report.recovery_at}"
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>" for cells in rows
    )
    takeover = [report.takeover_recovery] if report.takeover_recovery is not None else []
    takeover += [knee_text(report.knee)] if report.knee is not None else []
    takeover_html = "".join(f'<p class="takeover">{escape(t)}</p>\n' for t in takeover)
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in report.notes)
    return (
        '<section id="cross-sampling" aria-labelledby="cross-sampling-heading">\n'
        '<h2 id="cross-sampling-heading">Cross-sampling</h2>\n'
        f"<p>Recovery = (P − P_base) / (P_ref − P_base) on {escape(measure)}; reference: "
        f"{escape(report.reference)}. Switched and effective: shares of generated tokens; "
        "effective: the emitted token differs from an independent draw of the primary model "
        "(the papers' count), coupled: from its coupled draw.</p>\n"
        f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        f"</table></div>\n{takeover_html}{notes}\n</section>"
    )


def figures_html(drawn: Sequence[DrawnFigure], skipped: Mapping[str, str]) -> str:
    """`<section id="figures">`: each figure a `<figure>` with its PNG as a data URI and its
    caption, then the figures not drawn with the reason."""
    parts = [
        '<section id="figures" aria-labelledby="figures-heading">',
        '<h2 id="figures-heading">Figures</h2>',
    ]
    for figure in drawn:
        data = base64.b64encode(figure.png).decode("ascii")
        parts.append(
            f'<figure id="figure-{escape(figure.name)}">'
            f'<img src="data:image/png;base64,{data}" alt="{escape(figure.name)}: '
            f'{escape(figure.caption)}" loading="lazy">'
            f"<figcaption><strong>{escape(figure.name)}</strong> ({escape(figure.section)}): "
            f"{escape(figure.caption)}</figcaption></figure>"
        )
    if skipped:
        parts.append('<h3 id="figures-skipped">Not drawn</h3><ul class="skipped">')
        parts += [
            f"<li><code>{escape(name)}</code>: {escape(reason)}</li>"
            for name, reason in skipped.items()
        ]
        parts.append("</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def header_html(
    title: str, inputs: Mapping[str, str], created: str, included: Mapping[str, Any],
    notes: Sequence[str] = (),
) -> str:  # fmt: skip
    """The header's HTML: title, the inputs, when, what the viewer embeds and by which rule."""
    listed = "".join(
        f'<tr><th scope="row">{escape(k)}</th><td><code>{escape(v)}</code></td></tr>'
        for k, v in inputs.items()
    )
    viewer = (
        f"The token viewer embeds {included['top'] + included['sampled']:,} of "
        f"{included['responses_total']:,} responses: {included['rule']} (seed "
        f"{included['seed']})."
    )
    return "\n".join(
        [
            f"<h1>{escape(title)}</h1>",
            f'<div class="table-wrap"><table class="kv"><tbody>{listed}</tbody></table></div>',
            f"<p>Created {escape(created)}.</p>",
            f'<p class="included">{escape(viewer)}</p>',
            *(f'<p class="note">{escape(note)}</p>' for note in notes),
        ]
    )


def page(
    *,
    title: str,
    header: str,
    summary: str,
    cross_sampling: str,
    figures: str,
    data: str,
    template: str | None = None,
    script: str | None = None,
    style: str | None = None,
) -> str:
    """The whole page: `template` (default `assets/report.html`) with each `{{name}}` replaced,
    in one pass, by the HTML given (`title` escaped here), `data` (`embed_json`'s output) and
    the inlined `viewer.js` and the style sheets of `STYLE`.

    Raises:
        DivscopeError: the template lacks a placeholder, or the script or style sheet holds a
            closing tag that would end its element early.
    """
    template = asset("report.html") if template is None else template
    script = asset("viewer.js") if script is None else script
    style = "\n".join(asset(name) for name in STYLE) if style is None else style
    if re.search(r"</script", script, re.I) or re.search(r"</style", style, re.I):
        raise DivscopeError("viewer.js or a style sheet holds a closing </script> or </style> tag.")
    values = {
        "title": escape(title), "header": header, "summary": summary,
        "cross_sampling": cross_sampling, "figures": figures, "data": data, "script": script,
        "style": style,
    }  # fmt: skip
    missing = [name for name in ("data", "script") if "{{" + name + "}}" not in template]
    if missing:
        raise DivscopeError(f"the report template lacks {', '.join(missing)} placeholder(s).")
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)
