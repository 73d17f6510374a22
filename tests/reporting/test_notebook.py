"""`divscope.view`: the report's token viewer for a few responses, as self-contained HTML for a
notebook (its browser test: tests/reporting/test_browser.py)."""

from __future__ import annotations

import json
import re

import polars as pl
import pyarrow.parquet as pq
import pytest

import divscope
from divscope.errors import DivscopeError
from divscope.models.tokenizers import load_tokenizer
from divscope.reporting.data import thresholds
from divscope.reporting.page import asset


def _document(html: str) -> dict:
    return json.loads(re.search(r'<script type="application/json">(.*?)</script>', html).group(1))


def test_one_response_by_its_key(lab_head_tokens_path):
    view = divscope.view(lab_head_tokens_path, ("eval-000", 2))
    (shown,) = view.document["responses"]
    assert (shown["prompt_id"], shown["sample_id"]) == ("eval-000", 2)
    table = pl.read_parquet(lab_head_tokens_path)
    response = table.filter((pl.col("prompt_id") == "eval-000") & (pl.col("sample_id") == 2))
    assert len(shown["token"]) == response.height
    # The thresholds are the whole table's, as in the report.
    assert view.document["thresholds"] == thresholds(table)
    assert view.document["included"]["responses_total"] == 8
    # The tooltips decode the top-1 tokens with the table's base model.
    strings = view.document["strings"]
    assert not any(strings[i].startswith("id ") for i in shown["top1_base"])


def test_the_html_is_self_contained_and_its_ids_its_own(lab_head_tokens_path):
    view = divscope.view(lab_head_tokens_path, [("eval-000", 0), ("eval-000", 1)])
    first, second = view._repr_html_(), view._repr_html_()
    for html in (first, second):
        assert asset("viewer.js") in html and asset("viewer.css") in html
        assert "http://" not in html and "https://" not in html
        assert _document(html) == json.loads(json.dumps(view.document))
        assert html.count("</script>") == 2  # the data's and the script's
    prefixes = [re.search(r"'(dv[0-9a-f]{12}-)'", html).group(1) for html in (first, second)]
    assert prefixes[0] != prefixes[1]
    assert repr(view) == "TokenView(eval-000/0, eval-000/1)"


@pytest.mark.parametrize("form", ["arrow", "polars", "lazy", "dicts"])
def test_a_table_in_memory_shows_the_same(lab_head_tokens_path, form):
    expected = divscope.view(lab_head_tokens_path, responses=3, seed=1).document
    table = pq.read_table(lab_head_tokens_path)
    given = {
        "arrow": table, "polars": pl.from_arrow(table), "lazy": pl.from_arrow(table).lazy(),
        "dicts": table.to_pylist(),
    }[form]  # fmt: skip
    tokenizer = load_tokenizer("fixtures/lab/base")  # a polars frame has no metadata to name it
    assert divscope.view(given, responses=3, seed=1, tokenizer=tokenizer).document == expected


def test_a_response_the_table_lacks_is_named(lab_head_tokens_path):
    with pytest.raises(DivscopeError, match="no response prompt_id='eval-999', sample_id=0"):
        divscope.view(lab_head_tokens_path, ("eval-999", 0))
