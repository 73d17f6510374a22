"""`score`: a trajectory file and two models in, a token table on disk out.

This is what `divscope score` runs: read and validate the trajectories, cut them into units of
work (`score_units`), load both models and their (shared) tokenizer, and write each unit's
token rows as a part (`divscope.output`) with the run's provenance as metadata. Under torchrun or
`--shard i/n` each process scores its own share of the units (`divscope.distributed`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.compute as pc

from divscope.params import LIBRARY_ONLY, ModelPair, PartedOutput
from divscope.progress import Progress
from divscope.readers import Reading
from divscope.scoring.engine import ScoreConfig, ScoreSummary

PART_TOKENS = 2**18
"""Response tokens per part of a token table at most: what a killed run loses at most, per
process (a 7B pair scores that many in seconds to minutes)."""
MIN_PARTS = 16
"""Parts of a token table at least (given as many trajectories), so that small runs spread
over several processes too."""


def score(
    trajectories: str | os.PathLike,
    models: ModelPair,
    out: PartedOutput | None = None,
    config: ScoreConfig = ScoreConfig(),  # noqa: B008 (frozen, hashable)
    reading: Reading = Reading(),  # noqa: B008 (frozen, hashable)
    *,
    part_tokens: Annotated[int, LIBRARY_ONLY] = PART_TOKENS,
    progress: Annotated[bool, LIBRARY_ONLY] = True,
) -> ScoreSummary | pa.Table | None:
    """Score every response token of a trajectory file under a base and an RL model.

    Writes one row per response token (JS on top-p truncated distributions, cross-entropy,
    KL, entropies, ranks, top-k overlaps; see docs/contracts.md) and prints a one-screen summary.
    Each row names the model that generated its trajectory, `source`: the trajectories' `model`
    column, else --source; the metadata's `sources` gives each its role (`source_roles`). The
    table is written in parts as they are scored; --resume continues an interrupted run.

    Args:
        trajectories: Trajectories: Parquet or JSONL, token ids or text (docs/contracts.md,
            "Trajectories"), or responses in another format (verl, TRL, lm-eval, lighteval;
            docs/inputs.md).
        models: the base and the RL model (both needed; the RL tokenizer's ordinary
            vocabulary must be the base model's, `divscope.vocab.check_tokenizers`: differing
            special tokens only warn) and where they run.
        out: the token table (or its path): a path ending in `.parquet` is one file, any other
            path a directory of parts (`divscope.output`). Written in parts, one per unit of
            work (`score_units`), each as soon as it is scored; a file is assembled at the end.
            `resume` keeps the parts written, after checking that the settings and
            trajectories are the same; `shard` `i/n` does share i of n of the units.
        config: top-p, temperature, batching and chunking, and the trajectories' source where
            they have no `model` column.
        reading: the trajectories' format (`--from`, detected by default), their `correct`
            column and the prompts they were made from (`divscope.readers.read_responses`).
        part_tokens: response tokens per part at most (`score_units`); fixed by the first run
            of an output.
        progress: show a progress bar on stderr.

    Returns:
        The table's summary (sequences, tokens, JS percentiles; the full-sort count and the
        rate of this run's work), or None when the table is not complete yet: a share whose
        other shares are still running. In Python (docs/python.md, "Notebooks"), `trajectories`
        may also be a table in memory and each model one already loaded
        (`models.loading.given_model`), and with `out=None` the token table is written to a
        temporary file and returned: a `pyarrow.Table` with its `divscope` metadata.

    Raises:
        DivscopeError: bad trajectories (a `model` column that is not `config.source`
            included), an existing output without `overwrite` or `resume`, one made with
            other settings, models that cannot be loaded or whose ordinary vocabularies differ
            (unless `allow_tokenizer_mismatch`), or a sequence beyond a context.

    Example (the lab in `fixtures/lab`, from the repository root):
        >>> import tempfile
        >>> import divscope
        >>> tmp = tempfile.TemporaryDirectory()
        >>> few, tokens = f"{tmp.name}/few.jsonl", f"{tmp.name}/tokens.parquet"
        >>> with open("fixtures/lab/trajectories.jsonl") as lines, open(few, "w") as out:
        ...     _ = out.writelines(line for _, line in zip(range(8), lines))
        >>> from divscope.params import ModelPair
        >>> lab = ModelPair("fixtures/lab/base", "fixtures/lab/rl")
        >>> summary = divscope.score(few, lab, tokens, progress=False)
        >>> summary.sequences, summary.tokens  # the first 8 of the lab's 512 trajectories
        (8, 731)
        >>> from divscope.io import read_metadata
        >>> read_metadata(tokens)["sources"]  # their `model` column: the base model
        {'base': 'base'}
        >>> tmp.cleanup()
    """
    from divscope import __version__
    from divscope.distributed import current_world, reports
    from divscope.models.pair import open_pair
    from divscope.output import Parts, check_output, frame_digest, share_note
    from divscope.progress import note
    from divscope.readers import read_responses, reading_info
    from divscope.scoring.engine import planned, score_trajectories, with_source
    from divscope.tables import (
        attach_ids,
        input_name,
        list_lengths,
        read_columns,
        read_trajectories_arrow,
        scratch_table,
    )

    if out is None:
        return scratch_table("tokens.parquet", lambda path: score(
            trajectories, models, path, config, reading, part_tokens=part_tokens,
            progress=progress,
        ))  # fmt: skip
    out = PartedOutput.of(out)
    placement = models.placement
    where = input_name(trajectories, "trajectories")
    world = current_world(out.shard, placement.device, placement.device_map)
    check_output(out.path, world)
    # Cheap checks first: a bad file or an existing output should not wait for model loading.
    opened = cache(lambda: open_pair(models, world))  # the tokenizers, once, when needed
    frame = read_responses(trajectories, reading, lambda: opened().tokenizer)
    read_as = reading_info(frame)
    frame = read_trajectories_arrow(frame, source=where)
    frame = with_source(frame, config.source, where=where)
    note(_unknown_source(frame, where), enabled=reports())
    pair = opened()
    tokenizer, compatibility = pair.tokenizer, pair.compatibility
    assert compatibility is not None  # two models
    frame = attach_ids(frame, tokenizer)
    responses = list_lengths(frame["response_ids"])
    units = score_units(
        (responses + list_lengths(frame["prompt_ids"])).tolist(), responses.tolist(), part_tokens
    )
    settings = {
        "trajectories_sha256": frame_digest(
            frame.select(["prompt_id", "sample_id", "model", "prompt_ids", "response_ids"])
        ),
        "models": {name: str(path) for name, path in pair.paths.items()},
        "source": config.source,
        "top_p": config.stats.top_p,
        "temperature": config.stats.temperature,
        "window": config.stats.window,
        "head_dtype": config.head_dtype,
        "dtype": placement.dtype,
        "part_tokens": part_tokens,
        "divscope_version": __version__,
    }
    parts = Parts.start(
        out.path,
        "score",
        settings,
        len(units),
        resume=out.resume,
        overwrite=out.overwrite,
        world=world,
    )
    costs = [int(responses[rows].sum()) for rows in units]
    mine = [] if parts.finished else world.share(costs)
    done = parts.done(mine)
    todo = [u for u in mine if u not in done]
    fallback_rows = scored = 0
    start = time.perf_counter()
    if todo:
        named = frame["model"].drop_null()
        loaded = pair.load()
        config = planned(config, frame, loaded["base"], loaded["rl"], compatibility.vocab,
                         progress=progress)  # fmt: skip
        metadata = {
            **settings,
            "models": pair.describe(loaded),
            "trajectories": where,
            "reading": read_as,
            "sources": source_roles(
                sorted(pc.unique(named).to_pylist()), *map(str, pair.paths.values())
            ),
            "tokenizers": compatibility.metadata(),
            "batch_tokens": config.batch_tokens,  # as planned (`--max-memory`) or given
            "chunk_rows": config.chunk_rows,
            "device": pair.placement(),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        start = time.perf_counter()
        with Progress(
            int(sum(costs[u] for u in todo)), desc=f"scoring{share_note(world)}", unit="tok",
            scale=True, enabled=progress,
        ) as bar:  # fmt: skip
            writer = _UnitWriter(parts, [(u, costs[u]) for u in todo], metadata, bar)
            summary = score_trajectories(
                frame, loaded["base"], loaded["rl"], tokenizer, config, sink=writer.write,
                progress=False, vocab=compatibility.vocab, groups=[units[u] for u in todo],
            )  # fmt: skip
        fallback_rows, scored = summary.fallback_rows, summary.tokens
    seconds = time.perf_counter() - start
    if not parts.finish(world):
        return None
    js = read_columns(out.path, ["js"], what="the summary")["js"].to_numpy()
    resumed = scored if scored != js.size else None
    return ScoreSummary.of(js, frame.num_rows, fallback_rows, seconds, resumed)


def source_roles(values: Iterable[str | None], base: str, rl: str) -> dict[str, str | None]:
    """The role of each `source` value of a token table (its metadata's `sources`): `base`
    where the value names the base model, `rl` where it names the tuned one (--rl, an SFT
    control too), else None; null values are left out.

    A value names a model when it is the role's name (`base`, `rl`), the model's path or id as
    given, its resolved path, or its last path component (`generate` writes the path as given;
    the lab's trajectories say `base` and `rl`). Where a value names both models, the first of
    those four rules that tells them apart decides; a value that none does is None.

    >>> source_roles(["base", "fixtures/lab/sft", "sft", "teacher", None],
    ...              base="fixtures/lab/base", rl="fixtures/lab/sft")
    {'base': 'base', 'fixtures/lab/sft': 'rl', 'sft': 'rl', 'teacher': None}
    """
    models = {"base": base, "rl": rl}
    rules = (
        lambda role, model: role,
        lambda role, model: model,
        lambda role, model: str(Path(model).resolve()),
        lambda role, model: Path(model).name,
    )
    roles: dict[str, str | None] = {}
    for value in values:
        if value is None or value in roles:
            continue
        named = ([r for r, m in models.items() if rule(r, m) == value] for rule in rules)
        roles[value] = next((found[0] for found in named if len(found) == 1), None)
    return roles


def _unknown_source(frame: pa.Table, trajectories: str) -> str | None:
    """What `score` says on stderr about trajectories whose source is unknown (None: none)."""
    unknown = frame["model"].null_count
    if not unknown:
        return None
    which = "" if unknown == frame.num_rows else f"{unknown:,} of the {frame.num_rows:,} "
    return (
        f"{trajectories}: {which}trajectories have no 'model' and no --source was given, so "
        "their token-table `source` is null: analyze, plot and report cannot tell base "
        "rollouts from RL trajectories and pool them. Pass --source NAME (the model that "
        "generated them)."
    )


class _UnitWriter:
    """The sink of a run's batches: it collects each unit's batches, which arrive unit by unit
    (`score_trajectories(groups=...)`), and writes the unit's part once all of its tokens are
    in; `bar` counts the tokens."""

    def __init__(self, parts, units: list[tuple[int, int]], metadata: dict, bar) -> None:
        from divscope.tables import token_table_schema

        self.parts, self.metadata, self.bar = parts, metadata, bar
        self.pending = list(units)  # (unit, response tokens), in the order they are scored
        self.batches: list[pa.Table] = []
        self.schema = token_table_schema()

    def write(self, batch: pa.Table) -> None:
        self.bar.update(batch.num_rows)
        self.batches.append(batch)
        unit, tokens = self.pending[0]
        if sum(b.num_rows for b in self.batches) == tokens:
            self.parts.write(unit, pa.concat_tables(self.batches), self.metadata, self.schema)
            self.batches.clear()
            self.pending.pop(0)


def score_units(lengths: list[int], tokens: list[int], part_tokens: int) -> list[list[int]]:
    """The units of work of a scoring run: runs of the trajectories sorted by length (longest
    first; ties in input order), each filled up to total / max(ceil(total / part_tokens),
    MIN_PARTS) response `tokens` (so at most `part_tokens`; a longer trajectory is a unit of its
    own), hence at least `MIN_PARTS` units when there are that many trajectories. Each unit's
    rows are in input order.

    >>> score_units([5, 9, 7, 3], [1, 1, 1, 1], part_tokens=2)
    [[1], [2], [0], [3]]
    >>> score_units([], [], part_tokens=2)
    []
    """
    if not lengths:
        return []  # no unit: `Parts.start` says the input is empty
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    total = sum(tokens)
    n_units = max(-(-total // part_tokens), min(MIN_PARTS, len(order)))
    quota = total / n_units  # <= part_tokens
    units: list[list[int]] = [[]]
    filled = 0  # tokens of the last unit
    for i in order:
        if units[-1] and filled + tokens[i] > quota + 1e-9:
            units.append([])
            filled = 0
        units[-1].append(i)
        filled += tokens[i]
    return [sorted(unit) for unit in units]
