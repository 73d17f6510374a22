"""`cross_sample`: prompts and model paths in, graded cross-sample results on disk out.

What `divscope cross-sample` runs: validate the cheap inputs first (the output path, prompts,
grader, policies, budgets), load the models and their shared tokenizer, decode, grade, write
atomically. `divscope.formatting.curve_text` is the table the command prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from itertools import accumulate
from typing import TYPE_CHECKING, Annotated, Any

import pyarrow as pa

from divscope.decoding.inputs import Loaded, load, note_length_cap
from divscope.decoding.lockstep import DecodeConfig, Decoded, DecodeStats, decoding_models
from divscope.decoding.policies import Base, Early, Forward, Policy, RandomEffective, Reverse
from divscope.decoding.request import Request
from divscope.decoding.settings import Policies, parse_budgets, parse_names
from divscope.defaults import BUDGETS, GRADE_TIMEOUT, SAMPLES
from divscope.errors import DivscopeError
from divscope.params import LIBRARY_ONLY, Flag, ModelPair, PartedOutput
from divscope.progress import Progress
from divscope.schema import CROSS_SAMPLE_ARROW, CROSS_SAMPLE_PARAMS_ARROW, arrow_schema
from divscope.vocab import TokenPieces

if TYPE_CHECKING:
    from divscope.decoding.maps import DivergenceMap

PART_ROWS = 64
"""Responses per part of a cross-sample output, each part written as soon as its responses are
decoded and graded."""
UNIT_PARTS = 4
"""Parts of one setting decoded in one call (a unit of work, what a killed run loses at most
per process): the decoder refills its rows from all of the unit's responses, so its batch stays
full until the unit's last ones (a part alone, 64 responses decoded 25 at a time, leaves most
rows idle while its longest responses finish). A unit's batches depend on its requests only, so
sharded and resumed runs decode the same batches: a unit with a part missing is decoded whole
again, and only the missing parts written."""


@dataclass(frozen=True)
class CrossSampleModels(ModelPair):
    """The base model, its RL twin and the small pair of `rast`, and where they run.

    The small pair is a field of this group, not of `ModelPair`, because only cross-sample
    runs it: the other commands' options stay the ones that mean something to them, and the
    one loader (`models.pair.open_pair`) reads every model of a run by its field name.

    >>> CrossSampleModels("fixtures/lab/base", "fixtures/lab/rl").rast_base is None
    True
    """

    rast_base: str | None = None
    """rast: the small base model."""
    rast_rl: str | None = None
    """rast: the small RL model."""

    @classmethod
    def of(cls, models: ModelPair) -> CrossSampleModels:
        """`models` as this class: as it is, or a `ModelPair` without a small pair."""
        if isinstance(models, cls):
            return models
        return cls(**{f.name: getattr(models, f.name) for f in fields(ModelPair)})


@dataclass(frozen=True)
class Grid:
    """The settings a cross-sample run decodes and grades: budgets, responses per prompt, a
    forced opening, the grader.

    >>> Grid(budgets=(0, 4), n=2).budgets
    (0, 4)
    """

    budgets: Annotated[tuple[int, ...], Flag(parse=parse_budgets)] = BUDGETS
    """Switch budgets of forward, reverse, random and early (comma-separated; -1 = unlimited),
    and of gated and entropy with budget_sweep=true; the other policies (gated and entropy by
    default: the paper's unbudgeted takeover; early with a share) run once with budget -1."""
    n: Annotated[int, Flag("--n", "-n", min=1)] = SAMPLES
    """Responses sampled per prompt, per policy and budget (write -n under torchrun, which
    takes --n for an abbreviation of its own options)."""
    grader: str | None = None
    """math (Math-Verify on the last \\boxed{}), exact, lab, or your own function as
    module:function taking (response, answer) and returning a bool; none: `correct` is null."""
    grade_timeout: Annotated[float, Flag(min=0.0)] = GRADE_TIMEOUT
    """Wall-clock seconds allowed to grade one response; an overrun counts as incorrect."""
    force_prefix: str | None = None
    """The --forced-policies also run with each response forced to open with this text (e.g.
    Alright): its base-tokenizer ids (no special tokens) follow the prompt and start the
    response (switch positions count from the response's start; the prefix does not count
    towards --max-new-tokens). Their rows have `force_prefix` set: settings of their own."""
    forced_policies: Annotated[tuple[str, ...] | None, Flag(parse=parse_names)] = None
    """Comma-separated names of the policies that also run with --force-prefix (every policy
    of each name; default: every policy of the run)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "budgets", tuple(self.budgets))
        if self.forced_policies is not None:
            object.__setattr__(self, "forced_policies", tuple(self.forced_policies))


def cross_sample(
    prompts: str | os.PathLike,
    models: CrossSampleModels,
    policies: Policies,
    out: PartedOutput | None = None,
    config: Annotated[DecodeConfig, Flag(omit=("window",))] = DecodeConfig(),  # noqa: B008
    grid: Grid = Grid(),  # noqa: B008 (frozen, hashable)
    *,
    part_rows: Annotated[int, LIBRARY_ONLY] = PART_ROWS,
    progress: Annotated[bool, LIBRARY_ONLY] = True,
) -> pa.Table | None:
    """Decode responses to every prompt under each policy and budget, grade them and write them.

    --n responses per prompt of PROMPTS, with --base and --rl in lockstep. Each policy decides,
    token by token, whose token is emitted (forward: the RL token where JS > eps, up to each
    budget; stratum and map keys restrict or precompute where). Writes one row per response
    (n_switches, n_effective: switches whose token differs from an independent draw of the
    primary, switch_positions, switch_js: the online JS at each switch, correct)
    and prints accuracy and recovery with 95% CIs per setting and budget. Same --seed, same
    responses (on a GPU: with the same --batch-size). Results are written in parts as they are
    done; --resume continues an interrupted run.

    Args:
        prompts: Prompts: Parquet or JSONL with prompt_id, prompt, messages (chat turns) or
            prompt_ids, and answer (for --grader).
        models: the base model, the RL model (not needed by `base` and `rast`) and the small
            pair of `rast`; a plain `ModelPair` has no small pair.
        policies: the policies to run: `Policies` (specs and their default keys), or the
            specs alone, e.g. `"base,rl,forward:eps=0.05"`, `["base", "rl-replace"]` or
            `[Base(), RL(), Forward(eps=0.05)]` (`settings.Policies`). The matched controls
            are added here (`Policies.build` at `config.sampling`), so that the Python API and
            the command line run the same policies. A `forward` or `reverse` with a
            `map_table` switches at the positions of that token table's trajectory of each
            response with `js > eps` (`maps.DivergenceMap`; with a forced opening, counted
            from the response's start).
        out: the results (or their path): a `.parquet` or `.jsonl` file, or a directory of
            parts. Written in parts, one per chunk of prompts and setting
            (`divscope.output`), each as soon as it is decoded and graded; a file is assembled
            from them at the end. `resume` keeps the parts written, after checking that the
            settings and prompts are the same; `shard` `i/n` does share i of n of the units of
            work (`UNIT_PARTS` parts of one setting each; `out` must then be a directory;
            under torchrun each process takes its share by itself).
        config: the run's sampling (its one home), length cap, seed, batch size, stop tokens,
            chat template and system prompt.
        grid: budgets, responses per prompt, a forced opening and the grader.
        part_rows: responses per part (a chunk holds ceil(part_rows / n) prompts); fixed by
            the first run of an output.
        progress: show a progress bar (and the length cap note) on stderr.

    Returns:
        The results as written (docs/contracts.md, "Cross-sample results", plus
        `CROSS_SAMPLE_PARAMS_ARROW`), or None when the output is not complete yet: a share whose
        other shares are still running. In Python (docs/python.md, "Notebooks"), `prompts`
        may also be a table in memory and each model one already loaded
        (`models.loading.given_model`), and with `out=None` the results are written to a
        temporary file and returned.

    Raises:
        DivscopeError: bad prompts, budgets, policies or grader, a missing model, models whose
            ordinary vocabularies differ, a forced policy that does not run, a prefix that
            tokenizes to no token (or to a stop token), a map table that is unreadable or lacks
            a prompt, an existing output without `overwrite` or `resume`, or one made with
            other settings.

    Example (the lab in `fixtures/lab`, from the repository root):
        >>> import tempfile
        >>> import polars as pl
        >>> import divscope
        >>> from divscope.decoding.cross_sample import Grid
        >>> from divscope.params import ModelPair
        >>> tmp = tempfile.TemporaryDirectory()
        >>> prompts = f"{tmp.name}/prompts.jsonl"  # the first 2 of the lab's 256 eval prompts
        >>> pl.read_ndjson("fixtures/lab/prompts/eval.jsonl").head(2).write_ndjson(prompts)
        >>> lab = ModelPair("fixtures/lab/base", "fixtures/lab/rl")
        >>> results = divscope.cross_sample(
        ...     prompts, lab, "base,rl,forward:eps=0.05", f"{tmp.name}/forward.parquet",
        ...     grid=Grid(budgets=(4,), n=2, grader="lab"), progress=False)
        >>> results = pl.from_arrow(results)  # a pyarrow Table
        >>> results.group_by("policy", "budget", maintain_order=True).len().rows()
        [('base', -1, 4), ('rl', -1, 4), ('forward', 4, 4)]
        >>> tmp.cleanup()
    """
    from divscope import __version__
    from divscope.decoding.lockstep import planned
    from divscope.distributed import current_world
    from divscope.models.pair import model_names, open_pair
    from divscope.output import Parts, check_output, frame_digest, share_note
    from divscope.prompts import chat_settings, read_prompts_arrow
    from divscope.tables import conform, input_name, read_arrow, scratch_table

    if out is None:
        return scratch_table("cross_sample.parquet", lambda path: cross_sample(
            prompts, models, policies, path, config, grid, part_rows=part_rows,
            progress=progress,
        ))  # fmt: skip
    models, out = CrossSampleModels.of(models), PartedOutput.of(out)
    where = input_name(prompts, "prompts")
    policies = Policies.of(policies).build(config.sampling)
    budgets, n, grader, force_prefix = grid.budgets, grid.n, grid.grader, grid.force_prefix
    placement = models.placement
    world = current_world(out.shard, placement.device, placement.device_map)
    check_output(out.path, world)
    if n < 1:
        raise DivscopeError(f"--n must be >= 1, got {n}.")
    if not policies:
        raise DivscopeError("no policy given; pass --policy (e.g. base,rl,forward).")
    if not budgets or any(b < -1 for b in budgets):
        raise DivscopeError(f"--budgets {budgets}: give budgets >= 0, or −1 for unlimited.")
    if grader is not None:
        from divscope.grading import get_grader

        get_grader(grader)  # an unknown grader fails before the models load
    forced = _forced(policies, force_prefix, grid.forced_policies)
    frame = read_prompts_arrow(prompts)
    if grader is not None and "answer" not in frame.column_names:
        raise DivscopeError(f"{where}: --grader {grader} needs an 'answer' column in the prompts.")
    keys = frame["prompt_id"].to_pylist()
    maps = _maps(policies, keys)
    names = ("base", "rl", "rast_base", "rast_rl")
    needed = [name for name in names if any(name in decoding_models(p, config) for p in policies)]
    for name in needed:
        if getattr(models, name) is None:
            users = ", ".join(p.name for p in policies if name in p.models)
            who = f"policy {users}" if users else "--delta-alignment (all four models)"
            raise DivscopeError(f"{who} needs --{name.replace('_', '-')}.")
    model_paths = {name: str(path) for name, path in model_names(models, needed).items()}
    # The parts: each chunk of prompts under each setting (policy, budget and forced prefix);
    # the units of work: `UNIT_PARTS` consecutive chunks under one setting. Every setting
    # decodes the same units, so the models see identical batches across settings and the
    # reproduction invariants between policies hold bit for bit.
    runs = [
        (p, b, prefix)
        for ps, prefix in ((policies, None), (forced, force_prefix))
        for p in ps
        for b in (budgets if p.budgeted else (-1,))
    ]
    per_chunk = -(-part_rows // n)  # prompts per chunk
    chunks = [
        range(lo, min(lo + per_chunk, frame.num_rows)) for lo in range(0, frame.num_rows, per_chunk)
    ]
    groups = [
        range(lo, min(lo + UNIT_PARTS, len(chunks))) for lo in range(0, len(chunks), UNIT_PARTS)
    ]
    units = [(run, group) for run in range(len(runs)) for group in groups]
    settings = {
        "prompts_sha256": frame_digest(frame),
        "models": model_paths,
        "runs": [
            {"policy": p.name, **p.params(), "budget": b}
            | ({} if prefix is None else {"force_prefix": prefix})
            for p, b, prefix in runs
        ],
        "n": n,
        "prompts_per_part": per_chunk,
        "parts_per_unit": UNIT_PARTS,
        "temperature": config.sampling.temperature,
        "top_p": config.sampling.top_p,
        "max_new_tokens": config.max_new_tokens,
        "head_dtype": config.head_dtype,
        "seed": config.seed,
        "delta_alignment": config.delta_alignment,
        "stop": list(config.stop),
        **chat_settings(frame, config.chat, source=where),
        "grader": grader,
        "dtype": placement.dtype,
        "divscope_version": __version__,
    }
    parts = Parts.start(
        out.path, "cross-sample", settings, len(runs) * len(chunks),
        resume=out.resume, overwrite=out.overwrite, world=world,
    )  # fmt: skip

    def part(run: int, chunk: int) -> int:
        return run * len(chunks) + chunk

    costs = [sum(len(chunks[c]) for c in group) for _, group in units]  # prompts
    mine = [] if parts.finished else world.share(costs)
    done = parts.done(part(units[u][0], c) for u in mine for c in units[u][1])
    todo = [u for u in mine if any(part(units[u][0], c) not in done for c in units[u][1])]
    if todo:
        pair = open_pair(models, world, needed)
        loaded = load(
            frame, where, pair, stop=config.stop, chat=config.chat,
            force_prefix=force_prefix if forced else None,
        )  # fmt: skip
        note_length_cap(
            keys, loaded.prompt_ids, config.max_new_tokens, loaded.models, enabled=progress
        )
        # One batch size for every setting and part, planned on all the prompts (followed by
        # the forced prefix: the longest a run decodes from).
        longest = [[*ids, *loaded.prefix_ids] for ids in loaded.prompt_ids]
        config = planned(
            config, loaded.models, list(zip(keys, longest, strict=True)),
            vocab=loaded.vocab, progress=progress,
        )  # fmt: skip
        metadata = {
            **settings,
            "models": pair.describe(loaded.models),
            "prompts": where,
            "policies": [{"policy": p.name, **p.params()} for p in policies],
            "budgets": list(budgets),
            "force_prefix_ids": list(loaded.prefix_ids),
            "batch_size": config.batch_size,  # as planned (`--max-memory`) or given
            **loaded.metadata(),
            "device": pair.placement(),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        grade = _grading(grader, grid.grade_timeout, frame) if grader is not None else None
        pieces = TokenPieces(loaded.tokenizer)  # the switch tokens' text
        benchmarks = (
            dict(zip(keys, frame["benchmark"].to_pylist(), strict=True))
            if "benchmark" in frame.column_names
            else {}
        )
        rows = n * sum(costs[u] for u in todo)
        # see `_shared_key`: the responses and the work counted
        shared: dict[tuple[str, str | None, int], tuple[list[Decoded], DecodeStats]] = {}
        # forward's n_effective per (eps, budget, prefix, unit's first chunk), for
        # random-effective
        effective: dict[tuple[float, int, str | None, int], list[int]] = {}
        with Progress(
            rows, desc=f"cross-sampling{share_note(world)}", unit="seq", enabled=progress
        ) as bar:
            for unit in todo:
                run, group = units[unit]
                policy, budget, prefix = runs[run]
                opening = () if prefix is None else loaded.prefix_ids
                requests = [
                    Request(
                        keys[i],
                        sample,
                        (*loaded.prompt_ids[i], *opening),
                        budget,
                        _map_steps(policy, maps, keys[i], sample, len(opening)),
                    )  # fmt: skip
                    for c in group
                    for i in chunks[c]
                    for sample in range(n)
                ]
                # each chunk's requests, and each request's chunk
                sizes = [len(chunks[c]) * n for c in group]
                ends = accumulate(sizes)
                spans = {
                    c: range(end - size, end)
                    for c, size, end in zip(group, sizes, ends, strict=True)
                }
                chunk_of = [c for c, span in spans.items() for _ in span]
                key = _shared_key(policy, budget, prefix, group.start)
                matched = (policy.params().get("eps"), budget, prefix, group.start)
                if key in shared:
                    decoded, stats = shared[key]
                    stream: Iterable[tuple[int, Decoded]] = enumerate(decoded)
                else:
                    decoded, stats = [None] * len(requests), DecodeStats()  # type: ignore[list-item]
                    stream = _decode(
                        loaded, requests, policy, config, switches=effective.get(matched),
                        stats=stats,
                    )  # fmt: skip
                left = {c: len(span) for c, span in spans.items()}
                for j, response in stream:
                    decoded[j] = response
                    chunk = chunk_of[j]
                    left[chunk] -= 1
                    if left[chunk]:
                        continue
                    bar.update(len(spans[chunk]))
                    if part(run, chunk) in done:  # written by an earlier run: the same
                        continue
                    span = spans[chunk]
                    opened = [_opened(decoded[k], opening) for k in span]
                    texts = loaded.tokenizer.batch_decode(
                        [d.response_ids for d in opened], skip_special_tokens=True
                    )
                    results = _results_frame(
                        policy, requests[span.start : span.stop], opened, texts, config,
                        pieces=pieces, benchmarks=benchmarks, force_prefix=prefix,
                    )  # fmt: skip
                    if grade is not None:
                        results = grade(results)
                    results = conform(
                        results, CROSS_SAMPLE_ARROW, source="results", what="cross-sample results"
                    )
                    record = {"decoder": _decoder_record(config, stats)}
                    parts.write(part(run, chunk), results, metadata | record)
                if policy == Forward(eps=policy.params().get("eps")):
                    effective[matched] = [d.n_effective for d in decoded]
                if key is not None:
                    shared[key] = decoded, stats
    if not parts.finish(world):
        return None
    contract = CROSS_SAMPLE_ARROW | CROSS_SAMPLE_PARAMS_ARROW  # Parquet or JSONL: the same types
    return conform(
        read_arrow(out.path), contract, source=str(out.path), what="cross-sample results"
    )


def _grading(grader: str, timeout: float, prompts: pa.Table):
    """A unit's results (Arrow) -> the same results graded against the prompts' `answer`
    (grading runs on polars: `divscope.grading`)."""
    import polars as pl

    from divscope.grading import GradeConfig, grade_table

    config = GradeConfig(grader, timeout=timeout)
    answers = pl.from_arrow(prompts.select(["prompt_id", "answer"]))

    def grade(results: pa.Table) -> pa.Table:
        return grade_table(pl.from_arrow(results), config, answers=answers).to_arrow()

    return grade


def _maps(policies: Sequence[Policy], prompt_ids: Sequence[str]) -> dict[str, DivergenceMap]:
    """The retrospective maps of `policies` by table, each read once at the smallest eps that
    reads it, and checked to hold every prompt of `prompt_ids`.

    Raises:
        DivscopeError: an unreadable table, or a prompt it has no trajectory of.
    """
    floors: dict[str, float] = {}
    for policy in policies:
        table, eps = policy.params().get("map_table"), policy.params().get("eps")
        if table is not None:
            floors[table] = min(eps, floors.get(table, eps))
    if not floors:
        return {}
    from divscope.decoding.maps import read_map  # reads token tables with polars

    maps = {table: read_map(table, eps=eps) for table, eps in floors.items()}
    for divergence_map in maps.values():
        divergence_map.check_prompts(prompt_ids)
    return maps


def _map_steps(
    policy: Policy, maps: Mapping[str, DivergenceMap], prompt_id: str, sample_id: int, opening: int
) -> tuple[int, ...] | None:
    """The decoding steps where `policy`'s retrospective map has (`prompt_id`, `sample_id`)
    divergent: the map's positions less the `opening` tokens forced before them; None for a
    policy without a map."""
    params = policy.params()
    if params.get("map_table") is None:
        return None
    positions = maps[params["map_table"]].steps(prompt_id, sample_id, eps=params["eps"])
    return tuple(p - opening for p in positions if p >= opening)


def _shared_key(
    policy: Policy, budget: int, prefix: str | None, unit: int
) -> tuple[str, str | None, int] | None:
    """The key under which a unit's decode (`unit`: its first chunk) is shared with other
    settings, None when it is not: `forward` and `reverse` at budget 0 never switch, so they
    decode the same responses (the primary's, with no switch) for every eps, stratum and map;
    the run decodes each of their units once and writes it under each setting."""
    if budget != 0 or not isinstance(policy, Forward | Reverse):
        return None
    return policy.name, prefix, unit


def _forced(
    policies: Sequence[Policy], prefix: str | None, names: Sequence[str] | None
) -> list[Policy]:
    """The policies that also run with the forced opening `prefix`: those named `names`
    (every policy of each name), or all of them when `names` is None.

    Raises:
        DivscopeError: `names` without a prefix, an empty prefix, or a name that no policy of
            the run has.
    """
    if prefix is None:
        if names is not None:
            raise DivscopeError("--forced-policies needs --force-prefix (the forced opening).")
        return []
    if not prefix:
        raise DivscopeError("--force-prefix is empty; give the text that responses open with.")
    running = [p.name for p in policies]
    unknown = [name for name in names or () if name not in running]
    if unknown:
        raise DivscopeError(
            f"--forced-policies: {unknown[0]!r} is not a policy of this run "
            f"({', '.join(dict.fromkeys(running))}); add it to --policy or leave it out."
        )
    return [p for p in policies if names is None or p.name in names]


def _decode(
    loaded: Loaded,
    requests: list[Request],
    policy: Policy,
    config: DecodeConfig,
    *,
    switches: Sequence[int] | None = None,
    stats: DecodeStats | None = None,
) -> Iterator[tuple[int, Decoded]]:
    """Decode `requests` under `policy`: each response with its request's index, as soon as
    it is done (`lockstep.decode_stream`). `early` with a share first decodes the same
    requests under `Base()` (same requests, same batches: exactly the base control's tokens),
    and gives each request the budget `Early.budget_for` that base response's length.
    `random-effective` gives each request forward's `n_effective` as its `switches`:
    `switches` when the run has decoded forward's unit already, else from decoding the
    requests under `Forward(eps)` first (same requests, same batches: exactly forward's
    responses at the same budget). `stats` counts the last decode's work (the policy's
    own)."""
    from divscope.decoding.lockstep import decode, decode_stream

    common = {  # the decoder's arguments besides the requests, the policy and the config
        "vocab": loaded.vocab, "eos_ids": loaded.stop, "pad_id": loaded.pad_id,
        "suppressed": loaded.suppressed,
    }  # fmt: skip

    def run(requests: list[Request], policy: Policy, config: DecodeConfig) -> list[Decoded]:
        return decode(loaded.models, requests, policy, config, **common)

    if isinstance(policy, Early) and policy.share is not None:
        base = run(requests, Base(), replace(config, delta_alignment=False))
        requests = [
            replace(r, budget=policy.budget_for(len(d.response_ids)))
            for r, d in zip(requests, base, strict=True)
        ]
    if isinstance(policy, RandomEffective):
        if switches is None:
            forward = run(requests, Forward(eps=policy.eps), replace(config, delta_alignment=False))
            switches = [d.n_effective for d in forward]
        requests = [replace(r, switches=k) for r, k in zip(requests, switches, strict=True)]
    yield from decode_stream(loaded.models, requests, policy, config, **common, stats=stats)


def _decoder_record(config: DecodeConfig, stats: DecodeStats) -> dict[str, Any]:
    """A part's metadata `decoder`: which decoder ran its unit and how (the mean draft length k,
    the occupancy, the other models' forwards per emitted token), counted over the unit's
    decode up to the part's writing.

    >>> stats = DecodeStats(emitted=100, intervener_forwards=5, verified_rounds=2, drafted=12)
    >>> record = _decoder_record(DecodeConfig(), stats)
    >>> record["decoder"], record["draft"], record["intervener_forwards_per_token"]
    ('speculative', 6.0, 0.05)
    """
    per_token = stats.intervener_forwards / stats.emitted if stats.emitted else 0.0
    return {
        "decoder": config.decoder,
        "draft": stats.draft,
        "occupancy": stats.occupancy,
        "intervener_forwards_per_token": per_token,
    }


def _opened(decoded: Decoded, opening: Sequence[int]) -> Decoded:
    """`decoded` as a response that opens with the forced `opening`: its ids first, the switch
    positions counted from the response's start, no `delta_cosine` at the opening's positions
    (null)."""
    if not opening:
        return decoded
    cosines = decoded.delta_cosine
    return replace(
        decoded,
        response_ids=[*opening, *decoded.response_ids],
        switch_positions=[len(opening) + p for p in decoded.switch_positions],
        delta_cosine=None if cosines is None else [None] * len(opening) + cosines,
    )


def _results_frame(
    policy: Policy,
    requests: list[Request],
    decoded: list[Decoded],
    texts: list[str],
    config: DecodeConfig,
    *,
    pieces: TokenPieces,
    benchmarks: Mapping[str, str | None],
    force_prefix: str | None = None,
) -> pa.Table:
    """The results rows of one decoded unit (every `CROSS_SAMPLE` column, `correct` null, then
    `CROSS_SAMPLE_PARAMS_ARROW`).

    Args:
        policy: the policy decoded.
        requests: what was decoded.
        decoded: the decoder's output, one per request.
        texts: each response's text.
        config: the run's decoding settings.
        pieces: the readable text of single tokens (the switch tokens).
        benchmarks: each prompt's benchmark (the prompts' `benchmark`); a prompt left out has
            none (null).
        force_prefix: the text the responses were forced to open with (`force_prefix`).
    """
    params: dict[str, Any] = dict.fromkeys(CROSS_SAMPLE_PARAMS_ARROW)
    params |= {"temperature": config.sampling.temperature, "top_p": config.sampling.top_p}
    params |= {"max_new_tokens": config.max_new_tokens}
    params |= {k: v for k, v in policy.params().items() if k != "eps"}
    params["force_prefix"] = force_prefix
    eps = policy.params().get("eps")
    rows = len(requests)
    columns = {
        "prompt_id": [r.prompt_id for r in requests],
        "sample_id": [r.sample_id for r in requests],
        "policy": [policy.name] * rows,
        "budget": [r.budget for r in requests],
        "eps": [eps] * rows,
        "seed": [config.seed] * rows,
        "response_ids": [d.response_ids for d in decoded],
        "response": texts,
        "n_tokens": [len(d.response_ids) for d in decoded],
        "n_switches": [d.n_switches for d in decoded],
        "n_effective": [d.n_effective for d in decoded],
        "n_effective_coupled": [d.n_effective_coupled for d in decoded],
        "switch_positions": [d.switch_positions for d in decoded],
        "switch_primary_ids": [d.switch_primary_ids for d in decoded],
        "switch_primary_tokens": [pieces(d.switch_primary_ids) for d in decoded],
        "switch_tokens": [pieces([d.response_ids[p] for p in d.switch_positions]) for d in decoded],
        "switch_js": [d.switch_js for d in decoded],
        "delta_cosine": [d.delta_cosine for d in decoded],
        "benchmark": [benchmarks.get(r.prompt_id) for r in requests],
        "finished": [d.finished for d in decoded],
        "correct": [None] * rows,
    } | {c: [params[c]] * rows for c in CROSS_SAMPLE_PARAMS_ARROW}
    return pa.Table.from_pydict(
        columns, schema=arrow_schema(CROSS_SAMPLE_ARROW | CROSS_SAMPLE_PARAMS_ARROW)
    )
