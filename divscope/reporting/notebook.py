"""`view`: the report's token viewer for a few responses, inline in a Jupyter notebook.

`view` returns a `TokenView`, whose `_repr_html_` Jupyter shows: the same viewer as the
report's (`assets/viewer.js` and `assets/viewer.css`, the same colours, tooltips and keys) on the
same document (`data.viewer_document`), in one self-contained piece of HTML. Each rendering
gets its own element ids, so that several viewers in one notebook each work.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from divscope.defaults import SEED
from divscope.errors import DivscopeError

RESPONSES = 5
"""Responses a view embeds when none is named: the most divergent half and a seeded sample of
the others, as the report chooses them."""


@dataclass(frozen=True, repr=False)
class TokenView:
    """Responses of a token table, token by token, as the report's viewer shows them; Jupyter
    displays it (`_repr_html_`), and `html()` is the same HTML for a page of your own."""

    document: dict[str, Any]
    """The viewer's JSON document (`data.viewer_document`)."""

    def html(self) -> str:
        """The viewer as self-contained HTML: its style, its data and its script inline, and
        element ids of its own (a new prefix at every call).

        >>> view = TokenView({"responses": []})
        >>> view.html().count('class="dv-viewer"'), view.html() != view.html()
        (1, True)
        """
        from divscope.reporting.data import embed_json
        from divscope.reporting.page import asset

        prefix = f"dv{uuid.uuid4().hex[:12]}-"
        # The script finds its viewer beside itself, not by id: a notebook may run it before
        # the output is in the document.
        mount = (
            "(function (box) { window.divscopeViewer.mount(box.querySelector('.dv-viewer'), "
            "box.querySelector('script[type=\"application/json\"]'), "
            f"'{prefix}'); }}(document.currentScript.parentNode));"
        )
        return (
            '<div class="dv-root dv-notebook">'
            f"<style>{asset('viewer.css')}</style>"
            '<div class="dv-viewer"><p class="viewer-note">The token viewer needs JavaScript '
            "(in Jupyter: a trusted notebook).</p></div>"
            f'<script type="application/json">{embed_json(self.document)}</script>'
            f"<script>{asset('viewer.js')}\n{mount}</script>"
            "</div>"
        )

    def __repr__(self) -> str:
        """The responses shown, by key (the document itself is long).

        >>> TokenView({"responses": [{"prompt_id": "p1", "sample_id": 0}]})
        TokenView(p1/0)
        """
        keys = [f"{r['prompt_id']}/{r['sample_id']}" for r in self.document["responses"]]
        return f"TokenView({', '.join(keys)})"

    def _repr_html_(self) -> str:
        """What Jupyter displays: `html()`."""
        return self.html()


def view(
    tokens: str | os.PathLike | Any,
    response: tuple[str, int] | Sequence[tuple[str, int]] | None = None,
    *,
    responses: int = RESPONSES,
    tokenizer: str | os.PathLike | Any = None,
    seed: int = SEED,
) -> TokenView:
    """The report's token viewer for one response of a token table, or a few, for a notebook.

    Args:
        tokens: a token table: its path, or the table in memory (what `score(out=None)`
            returns, a polars DataFrame or LazyFrame, a list of dicts).
        response: the response to show, `(prompt_id, sample_id)`, or a list of them (listed
            in that order); None:
            `responses` of them, chosen as the report chooses (the most divergent half by
            largest `js`, then a seeded random sample of the others).
        responses: how many to show when `response` is None.
        tokenizer: decodes the models' top-1 tokens in the tooltips: a tokenizer, or its
            directory; default: the table's base model (its metadata) when it is a local
            directory, else the tooltips show ids.
        seed: the seed of the sample.

    Returns:
        A `TokenView`: Jupyter shows it inline (the same colours, tooltips and keys as the
        report's viewer); its thresholds are the whole table's.

    Raises:
        DivscopeError: a table that is not a token table, or a response it does not hold.

    Example (`lab_tokens`: the token table of the lab's first 8 trajectories, see conftest.py):
        >>> shown = view(lab_tokens, ("eval-000", 1))
        >>> [(r["prompt_id"], r["sample_id"]) for r in shown.document["responses"]]
        [('eval-000', 1)]
        >>> "divscopeViewer.mount" in shown._repr_html_()
        True
    """
    from divscope.io import scan_token_table
    from divscope.reporting.data import thresholds, viewer_document
    from divscope.reporting.report import decoder
    from divscope.schema import TOKEN_TABLE_ARROW
    from divscope.tables import in_memory, scratch_file

    if isinstance(tokens, pl.LazyFrame):
        tokens = tokens.collect()
    if in_memory(tokens):
        tokens = scratch_file(tokens, "tokens.parquet", TOKEN_TABLE_ARROW)
    path = tokens
    table = scan_token_table(path)
    decode, _ = decoder(path, tokenizer)
    if response is None:
        return TokenView(viewer_document(table, responses=responses, seed=seed, decode=decode))
    keys = [response] if isinstance(response, tuple) else list(response)
    held = table.select("prompt_id", "sample_id").unique().collect()
    wanted = pl.DataFrame(
        {"prompt_id": [str(k[0]) for k in keys], "sample_id": [int(k[1]) for k in keys]},
        schema=held.schema,
    )
    missing = wanted.join(held, on=["prompt_id", "sample_id"], how="anti")
    if missing.height:
        prompt_id, sample_id = missing.row(0)
        raise DivscopeError(
            f"{path}: no response prompt_id={prompt_id!r}, sample_id={sample_id} in the token "
            "table; name one of its (prompt_id, sample_id) pairs."
        )
    chosen = table.join(wanted.lazy(), on=["prompt_id", "sample_id"], how="semi")
    document = viewer_document(chosen, responses=len(keys), seed=seed, decode=decode)
    order = {(str(k[0]), int(k[1])): i for i, k in enumerate(keys)}
    document["responses"].sort(key=lambda r: order[r["prompt_id"], r["sample_id"]])
    document["thresholds"] = thresholds(table)  # the whole table's, as the report's
    document["included"] = {"responses_total": held.height, "rule": "the responses asked for"}
    return TokenView(document)


__all__ = ["RESPONSES", "TokenView", "view"]
