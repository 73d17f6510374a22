"""The teacher-forced scoring engine: trajectories in, token-table row groups out.

One forward pass per sequence per model, sequences packed into batches by a token budget
(sorted by length, right-padded; the causal mask alone, `_response_hidden`), the two models'
forwards running at once where they sit on separate GPUs. The decoder's final hidden states of the
response positions only go through the output head, `chunk_rows` rows at a time, and every
statistic of both models is computed on that chunk (`pair_stats`); no `[batch, seq, vocab]`
tensor ever exists. Each finished batch is handed to `sink` as a token-table `pyarrow.Table`
(the engine needs no polars), so the caller streams it to disk. A forward that runs out of GPU
memory runs again on each half of its batch (`divscope.oom`), with the same result; the
statistics of both models are computed on the base model's output-head device.

Position contract: the distribution scored for response token t is the next-token
distribution given prompt + response[:t], i.e. the output at input index prompt_len + t − 1.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch import Tensor

from divscope.defaults import BATCH_TOKENS
from divscope.errors import DivscopeError
from divscope.memory_plan import MAX_CHUNK_ROWS, announce, parse_memory, plan_scoring
from divscope.models.head import (
    OutputHead,
    check_head_dtype,
    check_head_reproduces_logits,
    check_output_head,
)
from divscope.models.lengths import context_length
from divscope.models.placement import on_separate_gpus
from divscope.models.threads import concurrently
from divscope.models.tokenizers import vocab_size
from divscope.oom import PLACEMENT_ADVICE, halving
from divscope.params import Flag
from divscope.progress import Progress
from divscope.schema import (
    TOKEN_TABLE_ARROW,
    TRAJECTORY_IDS,
    TRAJECTORY_KEY,
    arrow_schema,
    require_columns,
)
from divscope.scoring.metrics import StatsConfig, pair_stats
from divscope.tables import as_arrow, first_row, key_of, list_lengths
from divscope.vocab import TokenPieces

if TYPE_CHECKING:
    import polars as pl

# JS below this counts as "near zero" in the summary (nats; JS is in [0, ln 2]).
NEAR_ZERO_JS = 1e-3
SUMMARY_QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999)


@dataclass(frozen=True)
class ScoreConfig:
    """How trajectories are scored.

    >>> ScoreConfig(StatsConfig(top_p=0.9), batch_tokens=4096).stats.top_p
    0.9
    """

    stats: StatsConfig = StatsConfig()
    """Top-p, temperature and window of the statistics (--top-p, --temperature, --window)."""
    batch_tokens: Annotated[int | None, Flag(min=1)] = None
    """Padded tokens per forward batch (--batch-tokens); a longer sequence runs alone. None:
    as many as fit (`memory_plan.plan_scoring`: on a GPU, or with `max_memory`), else
    `BATCH_TOKENS`."""
    chunk_rows: Annotated[int | None, Flag(min=1)] = None
    """Response positions per output-head chunk (--chunk-rows); bounds the [rows, V] buffers.
    None: as many as fit (`memory_plan.plan_scoring`: on a GPU, or with `max_memory`), else as
    many as keep one float32 [rows, V] buffer within 24 MiB on CPU (the allocator then reuses
    its heap; larger buffers are fresh mappings whose page faults dominate the time); either
    way at most `memory_plan.MAX_CHUNK_ROWS` (1,024: more rows hold more memory, not more
    speed)."""
    max_memory: Annotated[int | None, Flag(parse=parse_memory, metavar="SIZE")] = None
    """Bytes the run may use per device (--max-memory), weights included: the budget of the
    values left None. None: on a GPU its free memory once the models are loaded; on the CPU
    no plan (the defaults above)."""
    head_dtype: str | None = None
    """`float32` computes the output head from a float32 copy of its weights (--head-dtype; see
    `models.head.OutputHead` for the memory it costs); None: from the weights as they are.
    Either way a bf16 or fp16 head's products are accumulated and returned in float32, never
    rounded to half precision first."""
    source: Annotated[str | None, Flag(metavar="NAME")] = None
    """The model that generated the trajectories (--source), the token table's `source`, for
    trajectories without a `model` column (or for their rows whose `model` is null); a file
    whose `model` says otherwise is refused. Name the model as --base or --rl does (its path or
    id, its directory's name) or by its role, `base` or `rl`. None: the `model` column, else
    null (the analyses then cannot tell base rollouts from RL trajectories)."""

    def __post_init__(self) -> None:
        if self.batch_tokens is not None and self.batch_tokens < 1:
            raise DivscopeError(f"--batch-tokens must be >= 1, got {self.batch_tokens}.")
        check_head_dtype(self.head_dtype)
        if self.chunk_rows is not None and self.chunk_rows < 1:
            raise DivscopeError(f"--chunk-rows must be >= 1, got {self.chunk_rows}.")
        if self.max_memory is not None and self.max_memory < 1:
            raise DivscopeError(f"--max-memory must be >= 1 byte, got {self.max_memory}.")


@dataclass(frozen=True)
class ScoreSummary:
    """What a scoring run produced, for the one-screen report at the end."""

    sequences: int
    tokens: int
    fallback_rows: int
    """Positions whose top-p/top-k needed the exact full sort (window too narrow)."""
    js_quantiles: tuple[tuple[float, float], ...]
    """(quantile, JS) pairs; empty when nothing was scored."""
    near_zero_js_share: float
    """Share of tokens with js < `NEAR_ZERO_JS`."""
    seconds: float

    scored_tokens: int | None = None
    """Tokens scored in `seconds` by this process, when not all of `tokens` (a resumed run, one
    of several processes); None: all of them."""

    @staticmethod
    def of(
        js: np.ndarray, sequences: int, fallback_rows: int, seconds: float, scored_tokens=None
    ) -> ScoreSummary:
        """The summary of a table's `js` column (`scored_tokens`: see the field)."""
        return ScoreSummary(
            sequences=sequences,
            tokens=int(js.size),
            fallback_rows=fallback_rows,
            js_quantiles=tuple((q, float(np.quantile(js, q))) for q in SUMMARY_QUANTILES)
            if js.size
            else (),
            near_zero_js_share=float((js < NEAR_ZERO_JS).mean()) if js.size else 0.0,
            seconds=seconds,
            scored_tokens=scored_tokens,
        )

    def format(self) -> str:
        """A short multi-line report."""
        scored = self.tokens if self.scored_tokens is None else self.scored_tokens
        rate = scored / self.seconds if self.seconds > 0 else math.nan
        quantiles = ", ".join(f"p{100 * q:g}={v:.4g}" for q, v in self.js_quantiles) or "-"
        share = f"{self.fallback_rows / scored:.2%}" if scored else "-"
        this = "" if self.scored_tokens is None else f"this process scored {scored:,} at "
        return "\n".join(
            [
                f"sequences        {self.sequences:,}",
                f"tokens           {self.tokens:,} ({this}{rate:,.0f} tokens/s, "
                f"{self.seconds:.1f} s)",
                f"JS quantiles     {quantiles}",
                f"near-zero JS     {self.near_zero_js_share:.2%} of tokens (js < {NEAR_ZERO_JS:g})",
                f"full-sort rows   {self.fallback_rows:,} ({share} of the tokens scored)",
            ]
        )


def score_trajectories(
    trajectories: Any,
    base,
    rl,
    tokenizer,
    config: ScoreConfig = ScoreConfig(),  # noqa: B008 (frozen, hashable)
    *,
    sink: Callable[[pa.Table], None],
    progress: bool = True,
    vocab: int | None = None,
    groups: Sequence[Sequence[int]] | None = None,
) -> ScoreSummary:
    """Score every response token of `trajectories` (or of the rows of `groups`) under `base`
    and `rl`.

    Args:
        trajectories: one row per response (a `pyarrow.Table` or a polars DataFrame) with
            `prompt_id`, `sample_id`, `prompt_ids`, `response_ids` (lists of token ids) and
            optionally `correct` and `model` (the token table's `source`, `with_source`: else
            `config.source`).
        base: the base model (a transformers causal LM, in eval mode, on its device).
        rl: the RL-fine-tuned model; it must share `tokenizer` with `base`.
        tokenizer: the shared tokenizer; its size is the vocabulary.
        config: top-p, temperature, batching and chunking; values left None are planned for
            these trajectories (`planned`).
        sink: called with each finished batch as a token-table `pyarrow.Table` (all
            `TOKEN_TABLE_ARROW` columns, those types), e.g. `TokenTableWriter.write` or
            `list.append`.
        progress: report progress with tokens/s (and a memory plan, once) on stderr
            (`divscope.progress`).
        vocab: the ids compared (`divscope.vocab.Compatibility.vocab`, the ids all the
            tokenizers share); None: `len(tokenizer)`.
        groups: row indices of `trajectories` to score, group by group: each group is packed
            into batches of its own and its batches reach `sink` before the next group's, so
            a caller knows a group is done when all of its tokens have arrived (the parts of
            `divscope.score`). None: every row, in one group. Every row is validated either way.

    Returns:
        The run's summary.

    Raises:
        DivscopeError: a missing column, an empty prompt or response, a token id outside the
            vocabulary, a `model` that is not `config.source`, a sequence longer than a model's
            context, or a model whose logits the engine cannot reproduce from its hidden
            states.
    """
    start = time.perf_counter()
    trajectories = with_source(as_arrow(trajectories), config.source)
    vocab = vocab_size(tokenizer) if vocab is None else vocab
    config = planned(config, trajectories, base, rl, vocab, progress=progress)
    plan = _Plan.build(trajectories, base, rl, vocab, config, groups)
    js_parts: list[np.ndarray] = []
    fallback_rows = 0
    with Progress(
        plan.total_tokens, desc="scoring", unit="tok", scale=True, enabled=progress
    ) as bar:
        for frame, fallbacks in _scored_batches(plan, base, rl, tokenizer, config):
            sink(frame)
            js_parts.append(frame["js"].to_numpy())
            fallback_rows += fallbacks
            bar.update(frame.num_rows)
    js = np.concatenate(js_parts) if js_parts else np.empty(0, dtype=np.float32)
    return ScoreSummary.of(js, plan.sequences, fallback_rows, time.perf_counter() - start)


def with_source(
    trajectories: pa.Table, source: str | None, *, where: str = "trajectories"
) -> pa.Table:
    """`trajectories` with their `model` column, which the token table keeps as `source`: the
    file's own, its nulls filled with `source` (--source); all `source` where there is no such
    column (null where `source` is None too).

    Raises:
        DivscopeError: a `model` value that is not `source` (`where` names the file).

    >>> table = pa.table({"prompt_id": ["a", "a"], "sample_id": [0, 1]})
    >>> with_source(table, "rl")["model"].to_pylist()
    ['rl', 'rl']
    >>> with_source(table.append_column("model", pa.array(["base"] * 2)), "rl")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: trajectories: column 'model' says ['base'], but --source is ...
    """
    text = pa.large_string()
    if "model" not in trajectories.column_names:
        model = pa.nulls(trajectories.num_rows, text) if source is None else None
        if model is None:
            model = pa.array([source] * trajectories.num_rows, text)
        return trajectories.append_column("model", model)
    if source is None:
        return trajectories
    column = trajectories["model"]
    values = sorted(pc.unique(column.drop_null()).to_pylist())
    if any(value != source for value in values):
        raise DivscopeError(
            f"{where}: column 'model' says {values}, but --source is {source!r}; --source "
            "names the model of trajectories that have no 'model' column: drop it (the column "
            "decides), or fix the column."
        )
    at = trajectories.schema.get_field_index("model")
    filled = pc.fill_null(column.cast(text), pa.scalar(source, text))
    return trajectories.set_column(at, "model", filled)


def score_table(
    trajectories: Any,
    base,
    rl,
    tokenizer,
    config: ScoreConfig = ScoreConfig(),  # noqa: B008 (frozen, hashable)
    *,
    progress: bool = True,
    vocab: int | None = None,
) -> pl.DataFrame:
    """The token table of `trajectories`, in memory, as a polars DataFrame: `score_trajectories`
    with its batches collected and concatenated (`vocab`: see there). For tables that fit in
    memory (calibration samples, tests, the monitor); `divscope.score` streams to disk instead.
    """
    import polars as pl

    parts: list[pa.Table] = []
    score_trajectories(
        trajectories, base, rl, tokenizer, config, sink=parts.append, progress=progress,
        vocab=vocab,
    )  # fmt: skip
    table = pa.concat_tables(parts) if parts else arrow_schema(TOKEN_TABLE_ARROW).empty_table()
    return pl.from_arrow(table)


def planned(
    config: ScoreConfig, trajectories: Any, base, rl, vocab: int, *, progress: bool
) -> ScoreConfig:
    """`config` with its batch tokens and chunk rows decided: the values given are kept, the
    others planned for the longest of `trajectories` (`memory_plan.plan_scoring`, which plans
    wherever a model sits on a GPU or `max_memory` is given; the plan printed once when
    `progress`), else `BATCH_TOKENS` and the CPU's chunk rule (`_cpu_chunk_rows`). A run cut
    into parts plans once, on all of its trajectories, so that every part is scored with the
    same values.

    Raises:
        DivscopeError: a missing column, or a budget that does not fit one sequence or one
            output-head row.
    """
    if config.batch_tokens is not None and config.chunk_rows is not None:
        return config
    trajectories = as_arrow(trajectories)
    require_columns(
        trajectories.column_names, TRAJECTORY_IDS, source="trajectories", what="scoring"
    )
    lengths = (
        list_lengths(trajectories["prompt_ids"]) + list_lengths(trajectories["response_ids"]) - 1
    )
    memory = plan_scoring(
        {"base": base, "rl": rl}, vocab, max_memory=config.max_memory,
        chunk_rows=config.chunk_rows, batch_tokens=config.batch_tokens,
        longest=max(int(lengths.max()) if lengths.size else 1, 1), head_dtype=config.head_dtype,
    )  # fmt: skip
    announce(memory, enabled=progress)
    if memory is None:
        return replace(
            config,
            batch_tokens=config.batch_tokens or BATCH_TOKENS,
            chunk_rows=config.chunk_rows or _cpu_chunk_rows(vocab),
        )
    return replace(config, batch_tokens=memory.batch_tokens, chunk_rows=memory.chunk_rows)


@dataclass(frozen=True)
class _Plan:
    """Validated inputs and the batches to run (lists of row indices, longest first within
    each group of rows)."""

    frame: pa.Table
    prompts: list[list[int]]
    responses: list[list[int]]
    batches: list[list[int]]
    vocab: int
    sequences: int
    """Rows to score."""
    total_tokens: int
    """Their response tokens."""

    @staticmethod
    def build(
        trajectories: pa.Table,
        base,
        rl,
        vocab: int,
        config: ScoreConfig,
        groups: Sequence[Sequence[int]] | None = None,
    ) -> _Plan:
        require_columns(
            trajectories.column_names,
            (*TRAJECTORY_KEY, *TRAJECTORY_IDS),
            source="trajectories",
            what="scoring",
        )
        check_ids(trajectories, vocab)
        prompts = trajectories["prompt_ids"].to_pylist()
        responses = trajectories["response_ids"].to_pylist()
        keys = list(zip(*(trajectories[c].to_pylist() for c in TRAJECTORY_KEY), strict=True))
        # The input is prompt + response[:-1]: the last token's own successor is never needed.
        lengths = [len(p) + len(r) - 1 for p, r in zip(prompts, responses, strict=True)]
        for name, model in (("base", base), ("rl", rl)):
            check_output_head(model, name, vocab)
            limit = context_length(model)
            if limit is None:
                continue
            for (prompt_id, sample_id), prompt, response, length in zip(
                keys, prompts, responses, lengths, strict=True
            ):
                if length > limit:
                    raise DivscopeError(
                        f"trajectories: prompt_id={prompt_id!r}, sample_id={sample_id!r} is too "
                        f"long for the {name} model: {len(prompt)} prompt + {len(response)} "
                        f"response tokens need {length} positions, its context is {limit} "
                        "(config.max_position_embeddings). Drop or truncate such trajectories."
                    )
        groups = [range(len(lengths))] if groups is None else groups
        plan = _Plan(
            frame=trajectories,
            prompts=prompts,
            responses=responses,
            batches=[
                [group[i] for i in batch]
                for group in groups
                for batch in _pack([lengths[j] for j in group], config.batch_tokens)
            ],
            vocab=vocab,
            sequences=sum(len(group) for group in groups),
            total_tokens=sum(len(responses[j]) for group in groups for j in group),
        )
        if trajectories.num_rows:
            for name, model in (("base", base), ("rl", rl)):
                check_head_reproduces_logits(model, name, (prompts[0] + responses[0])[:16], vocab)
        return plan


def check_ids(trajectories: Any, vocab: int, *, source: str = "trajectories") -> None:
    """Every trajectory has a prompt and a response, all ids inside the vocabulary.

    Raises:
        DivscopeError: naming `source`, the first bad trajectory and the offending id.

    >>> check_ids(pa.table({"prompt_id": ["a"], "sample_id": [0], "prompt_ids": [[1]],
    ...                     "response_ids": [[9]]}), vocab=8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: trajectories: token id 9 of prompt_id='a', ... [0, 8).
    """
    trajectories = as_arrow(trajectories)
    for column in TRAJECTORY_IDS:
        ids = trajectories[column]
        flat = pc.list_flatten(ids)
        rows = pc.list_parent_indices(ids)
        outside = pc.or_(pc.less(flat, 0), pc.greater_equal(flat, vocab))
        bad = np.zeros(trajectories.num_rows, dtype=bool)
        bad[rows.to_numpy()[outside.to_numpy(zero_copy_only=False)]] = True
        bad |= list_lengths(ids) == 0
        row = first_row(trajectories, pa.array(bad))
        if row is None:
            continue
        where = key_of(row)
        if not row[column]:
            part = column.removesuffix("_ids")
            raise DivscopeError(
                f"{source}: empty {part} for {where}; every trajectory needs at least "
                "one prompt token (e.g. BOS) and one response token."
            )
        offending = next(i for i in row[column] if not 0 <= i < vocab)
        raise DivscopeError(
            f"{source}: token id {offending} of {where} is outside the tokenizer's "
            f"vocabulary [0, {vocab})."
        )


def _pack(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Greedy batches over rows sorted by length (longest first) whose padded size
    (rows × longest) stays within `batch_tokens`; a longer row runs alone."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        # Rows come longest first, so a batch's first row sets its padded width.
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= batch_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _scored_batches(
    plan: _Plan, base, rl, tokenizer, config: ScoreConfig
) -> Iterator[tuple[pa.Table, int]]:
    """Yield (token-table batch, full-sort rows) per batch."""
    pieces = TokenPieces(tokenizer)
    scorer = _BatchScorer.build(plan, base, rl, config)
    for batch in plan.batches:
        batch = sorted(batch)  # input order within the batch
        columns, fallbacks = scorer.score(batch)
        responses = [plan.responses[i] for i in batch]
        yield _batch_frame(plan, batch, responses, columns, pieces), fallbacks


@dataclass(frozen=True)
class _BatchScorer:
    """Both models' forwards over a batch of a plan's rows, then the statistics of its
    response positions, chunk by chunk.

    The statistics are computed on one device, the base model's output head's: the RL model's
    head is copied there (`OutputHead(device=...)`) and its hidden states follow, so no
    `[rows, V]` logits cross devices when the models sit on different ones.

    The two models' forwards run at once, each on a thread of its own, where they sit on
    GPUs that share none (`--base-device cuda:0 --rl-device cuda:1`); elsewhere (the CPU, one
    GPU, a device map over the same GPUs) one after the other.

    A forward that runs out of GPU memory runs again on each half of the batch
    (`divscope.oom.halving`), padded to the batch's width, which gives the same hidden
    states (on the CPU; tested). The chunks are always the whole batch's: the output head's
    matrix product may round a row differently in a chunk of other rows (it does on the CPU
    for chunks of 1 to 3 rows), so splitting them would change the table. A chunk's memory
    does not depend on the batch, so one that does not fit is an error naming --chunk-rows.
    """

    plan: _Plan
    base: torch.nn.Module
    rl: torch.nn.Module
    head_b: OutputHead
    head_r: OutputHead
    stats: StatsConfig
    chunk_rows: int
    release_freed_memory: Callable[[], None]
    concurrent: bool
    """Both forwards at once (`on_separate_gpus`)."""

    @staticmethod
    def build(plan: _Plan, base, rl, config: ScoreConfig) -> _BatchScorer:
        head_b = OutputHead(base, plan.vocab, config.head_dtype)
        head_r = OutputHead(rl, plan.vocab, config.head_dtype, device=head_b.device)
        cpu = head_b.device.type == "cpu"
        return _BatchScorer(
            plan, base, rl, head_b, head_r, config.stats,
            chunk_rows=config.chunk_rows,  # decided by `planned`
            release_freed_memory=_heap_trimmer() if cpu else lambda: None,
            concurrent=on_separate_gpus(base, rl),
        )  # fmt: skip

    def score(self, batch: list[int]) -> tuple[dict[str, list[Tensor]], int]:
        """Each statistic's chunks (on the CPU) over the response positions of the plan's rows
        `batch`, in that order, and the number of full-sort rows.

        Raises:
            DivscopeError: a sequence whose forward does not fit in GPU memory alone, or a
                chunk that does not fit.
        """
        plan, head_b, chunk_rows = self.plan, self.head_b, self.chunk_rows
        width = max(len(plan.prompts[i]) + len(plan.responses[i]) - 1 for i in batch)
        with torch.inference_mode():
            hidden_b, hidden_r = self._hiddens(batch, width)  # [N, d_base], [N, d_rl]
            ids = [t for i in batch for t in plan.responses[i]]
            token_ids = torch.tensor(ids, dtype=torch.int64, device=head_b.device)  # [N]
            columns: dict[str, list[Tensor]] = {}
            fallbacks = 0
            try:
                for lo in range(0, token_ids.numel(), chunk_rows):
                    rows = slice(lo, lo + chunk_rows)
                    logits_b = head_b(hidden_b[rows])  # [c, V] float32
                    logits_r = self.head_r(hidden_r[rows])  # [c, V] float32, on the same device
                    stats = pair_stats(logits_b, logits_r, token_ids[rows], self.stats)
                    fallbacks += stats.fallback_rows
                    for name, value in stats.columns().items():
                        columns.setdefault(name, []).append(value.cpu())
                    del logits_b, logits_r, stats
                    self.release_freed_memory()
            except torch.cuda.OutOfMemoryError as error:
                raise DivscopeError(
                    f"out of GPU memory computing the statistics of {chunk_rows:,} positions at "
                    f"once: lower --chunk-rows (positions per output-head chunk), or "
                    f"{PLACEMENT_ADVICE}."
                ) from error
        return columns, fallbacks

    def _hiddens(self, batch: list[int], width: int) -> list[Tensor]:
        """Both models' `_hidden`, base first: at once where `concurrent`."""
        calls = [lambda name=name: self._hidden(name, batch, width) for name in ("base", "rl")]
        return concurrently(calls) if self.concurrent else [call() for call in calls]

    def _hidden(self, name: str, batch: list[int], width: int) -> Tensor:
        """The final hidden states `[N, d]` of model `name` (`base`, `rl`) at the response
        positions of `batch`, right-padded to `width`: in one forward, or where that runs out
        of GPU memory, half by half."""
        model = self.base if name == "base" else self.rl
        plan = self.plan

        def forward(rows: Sequence[int]) -> Tensor:
            prompts = [plan.prompts[i] for i in rows]
            return _response_hidden(model, prompts, [plan.responses[i] for i in rows], width)

        def describe(rows: Sequence[int]) -> str:
            return (
                f"the {name} model's forward pass over a batch of {len(rows):,} sequences "
                f"({len(rows) * width:,} padded tokens)"
            )

        def too_large(row: int) -> str:
            prompt_id, sample_id = (plan.frame[c][row].as_py() for c in TRAJECTORY_KEY)
            prompt, response = plan.prompts[row], plan.responses[row]
            return (
                f"out of GPU memory in the {name} model's forward pass over prompt_id="
                f"{prompt_id!r}, sample_id={sample_id!r} alone ({len(prompt):,} prompt + "
                f"{len(response):,} response tokens): {PLACEMENT_ADVICE}, or drop such long "
                "trajectories."
            )

        with torch.inference_mode():  # grad mode is per thread (`_hiddens`)
            return halving(
                forward,
                batch,
                merge=lambda first, second: torch.cat([first, second]),
                describe=describe,
                advice="lower --batch-tokens to avoid the recomputation",
                too_large=too_large,
            )


def _heap_trimmer() -> Callable[[], None]:
    """`malloc_trim(0)` where the C library is glibc, else a no-op.

    glibc serves the chunk's [rows, V] buffers from its heap, between smaller blocks (topk's
    per-row work buffers, result tensors); the holes they leave are often not reused, so
    without trimming after each chunk the peak memory grows with the sequence length.
    """
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    return lambda: trim(0)


def _cpu_chunk_rows(vocab: int) -> int:
    """Chunk rows without a memory plan (the CPU without --max-memory): as many as keep one
    float32 [rows, V] buffer within 24 MiB (see `ScoreConfig.chunk_rows`), at most
    `MAX_CHUNK_ROWS`."""
    return max(1, min(24 * 2**20 // (4 * vocab), MAX_CHUNK_ROWS))


def _response_hidden(
    model, prompts: list[list[int]], responses: list[list[int]], width: int = 0
) -> Tensor:
    """Final hidden states `[N, d]` of the positions that predict each response token
    (input index prompt_len + t − 1 for token t), for a batch right-padded to `width` (at
    least its longest input): rows padded to one width give the same states in any grouping
    (on the CPU), which a half of a batch that ran out of memory relies on.

    No padding mask: every row starts at input index 0 (its positions are 0, 1, ... as
    unpadded) and its padding comes after its last real token, so under the causal mask alone
    a real token attends to earlier real tokens only, and the states read here are those of
    the masked forward (bit for bit on the CPU; tested). The padding's own states are never
    read. Without a 4-D mask, SDPA can take its flash kernels on a GPU, and transformers
    builds no `[B, 1, S, S]` mask.
    """
    device = model.get_input_embeddings().weight.device
    inputs = [p + r[:-1] for p, r in zip(prompts, responses, strict=True)]
    width = max(width, *(len(x) for x in inputs))
    input_ids = torch.zeros(len(inputs), width, dtype=torch.int64)  # [B, S]; pad id 0 after
    row_index, position_index = [], []
    for i, (x, p, r) in enumerate(zip(inputs, prompts, responses, strict=True)):
        input_ids[i, : len(x)] = torch.tensor(x)
        row_index += [i] * len(r)
        position_index += range(len(p) - 1, len(p) - 1 + len(r))
    out = model.get_decoder()(input_ids=input_ids.to(device), attention_mask=None, use_cache=False)
    hidden = out.last_hidden_state  # [B, S, d]
    rows = torch.tensor(row_index, device=hidden.device)
    return hidden[rows, torch.tensor(position_index, device=hidden.device)]  # [N, d]


def _batch_frame(
    plan: _Plan,
    batch: list[int],
    responses: list[list[int]],
    columns: dict[str, list[Tensor]],
    pieces: TokenPieces,
) -> pa.Table:
    """Assemble one batch's token-table rows (every `TOKEN_TABLE_ARROW` column, in order)."""
    lengths = np.array([len(r) for r in responses])  # [B]
    positions = np.concatenate([np.arange(n) for n in lengths])  # [N]
    n_tokens = np.repeat(lengths, lengths)  # [N]
    token_ids = np.concatenate([np.asarray(r) for r in responses])  # [N]
    rows = plan.frame.take(np.asarray(batch)).take(np.repeat(np.arange(len(batch)), lengths))
    n = len(token_ids)
    values = {
        "prompt_id": rows["prompt_id"],
        "sample_id": rows["sample_id"],
        "source": rows["model"],  # `with_source`
        "correct": rows["correct"] if "correct" in rows.column_names else pa.nulls(n),
        "position": positions,
        "n_tokens": n_tokens,
        "rel_position": positions / n_tokens,
        "token_id": token_ids,
        "token": pieces(token_ids),
        **{name: torch.cat(parts).numpy() for name, parts in columns.items()},
    }
    arrays = [
        pc.cast(pa.array(value) if isinstance(value, np.ndarray | list) else value, dtype)
        for value, dtype in ((values[name], dtype) for name, dtype in TOKEN_TABLE_ARROW.items())
    ]
    return pa.Table.from_arrays(arrays, schema=arrow_schema(TOKEN_TABLE_ARROW))
