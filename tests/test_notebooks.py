"""docs/notebooks/lab.ipynb, executed in a Python kernel (nbclient) on the lab: its numbers are
those of the same calls on files, and its token viewers are there. A kernel and the lab's
scoring take about 25 s: an end-to-end test (marker `e2e`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path("docs/notebooks/lab.ipynb")
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def executed():
    """The notebook, run from its folder as a reader runs it; its code cells' results."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )  # fmt: skip
    client.execute()
    return [
        [output for output in cell.outputs if output.output_type == "execute_result"]
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]


def test_the_notebook_scores_and_summarizes_the_lab(executed, tmp_path):
    import divscope
    from divscope.params import ModelPair

    populations, tokens, summary = (cell[0]["data"]["text/plain"] for cell in executed[:3])
    assert populations == "[('base', 4), ('rl', 4)]"
    # The same trajectories from a file, the models by name: the same numbers.
    trajectories = pl.read_ndjson("fixtures/lab/trajectories.jsonl")
    trajectories.filter(pl.col("prompt_id") == "eval-000").write_ndjson(tmp_path / "t.jsonl")
    lab = ModelPair("fixtures/lab/base", "fixtures/lab/rl")
    divscope.score(tmp_path / "t.jsonl", lab, tmp_path / "tokens.parquet", progress=False)
    expected = divscope.analyze(tmp_path / "tokens.parquet", tmp_path / "summary.json")
    assert int(tokens) == expected.n_tokens
    shown = (
        expected.n_responses,
        round(expected.core.sparsity.share_below[0.01], 3),
        round(expected.takeover.lorenz.gini, 3),
    )
    assert summary == repr(shown)


def test_the_notebook_shows_its_token_viewers(executed):
    one, several = (cell[0]["data"] for cell in executed[3:5])
    documents = []
    for data in (one, several):
        html = data["text/html"]
        assert "divscopeViewer.mount" in html and 'class="dv-viewer"' in html
        data_tag = re.search(r'<script type="application/json">(.*?)</script>', html, re.S)
        documents.append(json.loads(data_tag.group(1)))
    assert [(r["prompt_id"], r["sample_id"]) for r in documents[0]["responses"]] == [
        ("eval-000", 4)
    ]
    assert len(documents[1]["responses"]) == 4
    assert one["text/plain"] == "TokenView(eval-000/4)"
