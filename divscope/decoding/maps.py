"""Retrospective divergence maps: where `forward` and `reverse` switch under `--map
retrospective`.

A map is a token table (`divscope score`) of reference trajectories, e.g. the RL model's own
responses scored against the base model, or scored against an intermediate checkpoint
(`--rl rl-step-30`): the map of a trajectory is its positions with `js > eps`. A cross-sampled
response (prompt_id, sample_id s) reads the trajectory of the same prompt with sample id s when
the table has it, else the (s mod k)-th of the prompt's k sample ids in ascending order.

>>> import polars as pl
>>> table = pl.DataFrame({"prompt_id": ["a"] * 3 + ["b"], "sample_id": [0, 0, 0, 3],
...                       "position": [0, 1, 2, 0], "js": [0.2, 0.01, 0.3, 0.5]})
>>> divergence_map = DivergenceMap(table, source="tokens.parquet")
>>> divergence_map.steps("a", 0, eps=0.1), divergence_map.steps("b", 1, eps=0.1)
((0, 2), (0,))
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import polars as pl

from divscope.errors import DivscopeError
from divscope.schema import require_columns

MAP_COLUMNS: tuple[str, ...] = ("prompt_id", "sample_id", "position", "js")
"""The token-table columns a map reads."""


class DivergenceMap:
    """Per reference trajectory of a token table, its positions and their `js`.

    Args:
        table: token-table rows (at least `MAP_COLUMNS`), e.g. only those above the smallest
            threshold the map is read at.
        source: the table's path, for messages.
        keys: `prompt_id`, `sample_id` of every reference trajectory; None: `table`'s.

    Raises:
        DivscopeError: a missing column.
    """

    def __init__(
        self, table: pl.DataFrame, *, source: str, keys: pl.DataFrame | None = None
    ) -> None:
        require_columns(table.columns, MAP_COLUMNS, source=source, what="a retrospective map")
        self.source = source
        keys = table if keys is None else keys
        self._samples: dict[str, list[int]] = {}
        for prompt_id, sample_id in (
            keys.select("prompt_id", "sample_id")
            .unique()
            .sort("prompt_id", "sample_id")
            .iter_rows()
        ):
            self._samples.setdefault(prompt_id, []).append(int(sample_id))
        empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
        self._js = dict.fromkeys(
            ((p, s) for p, samples in self._samples.items() for s in samples), empty
        )
        rows = table.select(MAP_COLUMNS).sort("prompt_id", "sample_id", "position")
        for (prompt_id, sample_id), group in rows.group_by(
            "prompt_id", "sample_id", maintain_order=True
        ):
            self._js[(prompt_id, int(sample_id))] = (
                group["position"].to_numpy(),
                group["js"].to_numpy(),
            )

    def check_prompts(self, prompt_ids: Iterable[str]) -> None:
        """Raise unless every prompt of `prompt_ids` has a trajectory in the map.

        Raises:
            DivscopeError: naming the table and the first missing prompt.
        """
        missing = [p for p in prompt_ids if p not in self._samples]
        if missing:
            raise DivscopeError(
                f"--map-table {self.source}: no trajectory of prompt_id {missing[0]!r} "
                f"({len(missing):,} prompt(s) missing); score reference trajectories of every "
                "prompt (divscope score) or leave the prompt out of the prompts file."
            )

    def reference(self, prompt_id: str, sample_id: int) -> int:
        """The sample id of the trajectory that response (`prompt_id`, `sample_id`) reads:
        the same when the map has it, else the (sample_id mod k)-th of the prompt's k."""
        samples = self._samples[prompt_id]
        return sample_id if sample_id in samples else samples[sample_id % len(samples)]

    def steps(self, prompt_id: str, sample_id: int, *, eps: float) -> tuple[int, ...]:
        """The positions, ascending, of the reference trajectory of (`prompt_id`,
        `sample_id`) with `js > eps`.

        Raises:
            DivscopeError: a prompt with no trajectory in the map.
        """
        self.check_prompts([prompt_id])
        positions, js = self._js[(prompt_id, self.reference(prompt_id, sample_id))]
        return tuple(positions[js > eps].tolist())


def read_map(path: str | os.PathLike, *, eps: float | None = None) -> DivergenceMap:
    """The map of the token table at `path`, keeping only the rows with `js > eps` (all
    with None) and every trajectory's key.

    Args:
        path: a token table (`divscope score`: one Parquet file or a directory of parts).
        eps: the smallest threshold the map will be read at.

    Raises:
        DivscopeError: a missing or unreadable table, or one without the token-table columns.
    """
    from divscope.io import scan_token_table

    lazy = scan_token_table(path).select(MAP_COLUMNS)
    kept = lazy if eps is None else lazy.filter(pl.col("js") > eps)
    keys = lazy.select("prompt_id", "sample_id").unique()
    return DivergenceMap(kept.collect(), source=str(path), keys=keys.collect())
