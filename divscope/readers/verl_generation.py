"""verl's `main_generation` output: the dataset's parquet with a `responses` column.

The layout, from verl/trainer/main_generation.py (volcengine/verl): the dataset
(`data.path`: verl's columns, `prompt` the chat messages, a list of role/content, then
`data_source`, `ability`, `reward_model` {`ground_truth`, `style`}, `extra_info`) written back
(`data.output_path`) with `responses`: per row the list of its `data.n_samples` responses, each
decoded with `skip_special_tokens=True` (EOS and padding gone).

Mapping: one trajectory per response; `prompt_id` = the row's number in the file (as text),
`sample_id` = the response's place in `responses`; `messages` = `prompt` (the prompt ids are
rebuilt through the chat template, `divscope.prompts.template_messages`, as main_generation
applied it); `response`; `answer` = `reward_model.ground_truth` where there is one (as text).
The dataset's other columns are kept. The file grades nothing: `divscope grade` does.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from divscope.readers import Format, ReadContext


def read(table: pa.Table, context: ReadContext) -> pa.Table:
    """A main_generation parquet as trajectory columns, one row per response.

    >>> table = pa.table({"prompt": [[{"role": "user", "content": "2 + 2?"}]],
    ...                   "responses": [["4", "5"]]})
    >>> rows = read(table, ReadContext("gen.parquet")).to_pylist()
    >>> [(r["prompt_id"], r["sample_id"], r["response"]) for r in rows]
    [('0', 0, '4'), ('0', 1, '5')]
    """
    responses = table["responses"].combine_chunks()
    rows = pc.list_parent_indices(responses)
    offsets = responses.offsets.to_numpy()
    sample = np.arange(len(rows)) - offsets[rows.to_numpy()]
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "prompt_id": pc.cast(rows, pa.large_string()),
        "sample_id": pa.array(sample, pa.int32()),
        "messages" if _is_chat(table) else "prompt": table["prompt"].take(rows),
        "response": pc.list_flatten(responses),
    }
    if _has_ground_truth(table):
        truth = pc.struct_field(table["reward_model"], "ground_truth")
        columns["answer"] = pc.cast(truth, pa.large_string()).take(rows)
    kept = [c for c in table.column_names if c not in ("prompt", "responses")]
    columns |= {c: table[c].take(rows) for c in kept}
    return pa.table(columns)


def _has_ground_truth(table: pa.Table) -> bool:
    if "reward_model" not in table.column_names:
        return False
    kind = table.schema.field("reward_model").type
    return pa.types.is_struct(kind) and kind.get_field_index("ground_truth") >= 0


def _is_chat(table: pa.Table) -> bool:
    kind = table.schema.field("prompt").type
    return pa.types.is_list(kind) or pa.types.is_large_list(kind)


FORMAT = Format("verl-generation", ("prompt", "responses"), read)
"""verl's main_generation parquet: the dataset with a `responses` list column."""
