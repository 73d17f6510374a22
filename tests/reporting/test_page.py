"""The report's HTML: sections, escaping, embedded figures, no external URL."""

from __future__ import annotations

import json
import re

import pytest

from divscope.analyses.summary import summary
from divscope.errors import DivscopeError
from divscope.params import Recovery
from divscope.reporting import data, page
from divscope.testing import synthetic_results, synthetic_tokens

MINIMAL = (
    "<html><head><title>{{title}}</title><style>{{style}}</style></head><body>"
    "<header>{{header}}</header>{{summary}}{{cross_sampling}}{{figures}}"
    '<div id="viewer"></div><script type="application/json" id="divscope-data">{{data}}</script>'
    "<script>{{script}}</script></body></html>"
)
PNG = b"\x89PNG\r\n\x1a\nnot really"


@pytest.fixture(scope="module")
def result():
    tokens = synthetic_tokens(n_prompts=6, n_samples=4, length=40)
    return summary(tokens, cross_sample=synthetic_results(), recovery=Recovery(n_boot=20))


def render(result, *, template=MINIMAL, script="/* viewer */", style="/* style */", doc=None):
    doc = doc or {"strings": ["</script><script>alert(1)</script>"]}
    return page.page(
        title="divscope report: <b>rl</b>",
        header=page.header_html(
            "divscope report", {"token table": "runs/<x>.parquet"}, "2026-01-01 00:00 UTC",
            {"responses_total": 24, "top": 2, "sampled": 2, "seed": 0, "rule": "a & b"},
            notes=["Top-1 tokens are shown as ids"],
        ),
        summary=page.summary_html(result),
        cross_sampling=page.cross_sampling_html(result),
        figures=page.figures_html(
            [page.DrawnFigure("lorenz", "takeover", "Lorenz <curve> & Gini", PNG)],
            {"evolution": "needs --evolution with token tables"},
        ),
        data=data.embed_json(doc),
        template=template,
        script=script,
        style=style,
    )  # fmt: skip


def test_page_holds_each_section_in_order(result):
    html = render(result)
    order = ['id="summary"', 'id="cross-sampling"', 'id="figures"', 'id="viewer"',
             'id="divscope-data"']  # fmt: skip
    positions = [html.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "{{" not in html
    assert "<title>divscope report: &lt;b&gt;rl&lt;/b&gt;</title>" in html
    assert "runs/&lt;x&gt;.parquet" in html and "a &amp; b" in html


def test_summary_tables_hold_both_papers_with_intervals(result):
    html = page.summary_html(result)
    assert result.core.paper.split(" (")[0] in html
    assert result.takeover.paper.split(" (")[0] in html
    assert html.count("<table") >= 6
    # intervals as estimate [low, high]
    assert re.search(r"\d(\.\d+)? \[\d(\.\d+)?(e-\d+)?, \d(\.\d+)?(e-\d+)?\]", html)
    # the global planning share beside the takeover paper's 1.9%
    plan = result.takeover.planning_enrichment
    table = html[html.index("<caption>planning enrichment</caption>") :].split("</table>")[0]
    for name in ("share_all", "paper_share_all", "n_words"):
        assert f'<th scope="row">{name}</th>' in table
    assert f"<td>{page._cell(plan.share_all)}</td>" in table and "<td>0.019</td>" in table


def test_cross_sampling_table(result):
    html = page.cross_sampling_html(result)
    assert '<th scope="col">recovery [95% CI]</th>' in html
    # gated rows: their recovery is labelled against the guide model, and the knee is shown.
    assert (
        "Takeover rows (`gated`, `entropy`) and knee: recovery against the guide model "
        "(the paper: a same-size thinking model)"
    ) in html.replace("&#x27;", "'").replace("&quot;", '"')
    assert "Takeover knee of `gated`" in html
    for policy in ("forward", "reverse", "random", "base", "rl"):
        assert f"<td>{policy}</td>" in html
    no_xs = summary(
        synthetic_tokens(n_prompts=2, n_samples=2, length=20), recovery=Recovery(n_boot=10)
    )
    assert page.cross_sampling_html(no_xs) == ""


def test_figures_are_data_uris_with_captions_and_skips_listed(result):
    html = render(result)
    (src,) = re.findall(r'<img src="([^"]+)"', html)
    assert src.startswith("data:image/png;base64,")
    assert "<figcaption><strong>lorenz</strong>" in html
    assert "Lorenz &lt;curve&gt; &amp; Gini" in html
    assert "<code>evolution</code>: needs --evolution" in html


def test_embedded_data_cannot_close_its_tag_and_round_trips(result):
    doc = {"strings": ["</script><script>alert(1)</script>", "\u2028", "😀"]}
    html = render(result, doc=doc)
    match = re.search(r'id="divscope-data">(.*?)</script>', html, re.S)
    assert json.loads(match.group(1)) == doc
    assert "alert(1)</script>" not in html


def test_no_external_url_with_the_real_assets(result):
    html = render(result, template=None, script=None, style=None)
    assert "http://" not in html and "https://" not in html
    assert 'id="viewer"' in html and 'id="divscope-data"' in html
    for name in ("report.html", "viewer.js", "report.css"):
        assert page.asset(name)


def test_script_that_closes_its_tag_is_refused(result):
    with pytest.raises(DivscopeError, match="closing"):
        render(result, script="x = '</script>'")
    with pytest.raises(DivscopeError, match="placeholder"):
        render(result, template="<html>{{title}}</html>")
