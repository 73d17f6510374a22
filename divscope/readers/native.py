"""divscope's own trajectory columns (docs/contracts.md, "Trajectories"; `divscope generate`'s
output, graded responses, cross-sample results): read as they are.

The file needs no mapping: `prompt_id`, `sample_id`, ids or text, `correct`, `answer`, `model`
are already the trajectory columns. What reads it checks what it needs: `score` validates the
trajectories (`divscope.tables.read_trajectories_arrow`), `grade` and `analyze --difficulty`
the columns they use.
"""

from __future__ import annotations

import pyarrow as pa

from divscope.readers import Format, ReadContext


def read(table: pa.Table, context: ReadContext) -> pa.Table:
    """The file's table itself: its columns are divscope's own.

    >>> read(pa.table({"prompt_id": ["a"]}), ReadContext("t.jsonl")).column_names
    ['prompt_id']
    """
    return table


FORMAT = Format("divscope", ("prompt_id",), read, decoded=False)
"""divscope's trajectory columns: a `prompt_id` at least (docs/contracts.md)."""
