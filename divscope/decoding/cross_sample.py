"""`cross_sample`: prompts and model paths in, graded cross-sample results on disk out.

What `divscope cross-sample` runs: validate the cheap inputs first (the output path, prompts,
grader, policies, budgets), load the models and their shared tokenizer, decode, grade, write
atomically. `divscope.formatting.curve_text` is the table the command prints.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from divscope.decoding.lockstep import DecodeConfig, Decoded, decoding_models
from divscope.decoding.maps import DivergenceMap
from divscope.decoding.policies import Base, Early, Forward, Policy, Reverse
from divscope.decoding.request import Request
from divscope.defaults import BUDGETS, DEVICE, DTYPE, GRADE_TIMEOUT, SAMPLES
from divscope.errors import DivscopeError
from divscope.progress import Progress
from divscope.schema import CROSS_SAMPLE_PARAMS
from divscope.vocab import Compatibility, TokenPieces

PART_ROWS = 64
"""Responses per part of a cross-sample output: what a killed run loses at most, per process."""

MODEL_FLAGS: dict[str, str] = {
    "base": "--base",
    "rl": "--rl",
    "rast_base": "--rast-base",
    "rast_rl": "--rast-rl",
}


def cross_sample(
    prompts: str | os.PathLike,
    *,
    base: str,
    policies: Sequence[Policy],
    out: str | os.PathLike,
    rl: str | None = None,
    budgets: Sequence[int] = BUDGETS,
    n: int = SAMPLES,
    config: DecodeConfig = DecodeConfig(),  # noqa: B008 (frozen, hashable)
    grader: str | None = None,
    grade_timeout: float = GRADE_TIMEOUT,
    rast_base: str | None = None,
    rast_rl: str | None = None,
    dtype: str = DTYPE,
    device: str = DEVICE,
    device_map: str | None = None,
    base_device: str | None = None,
    rl_device: str | None = None,
    stop: Sequence[str] = (),
    chat_template: bool = False,
    allow_tokenizer_mismatch: bool = False,
    force_prefix: str | None = None,
    forced_policies: Sequence[str] | None = None,
    overwrite: bool = False,
    resume: bool = False,
    shard: str | None = None,
    part_rows: int = PART_ROWS,
    progress: bool = True,
) -> pl.DataFrame | None:
    """Decode responses to every prompt under each policy and budget, grade them and write them.

    `n` responses per prompt, per policy and budget.

    Args:
        prompts: Parquet or JSONL prompts (`prompt_id`, `prompt` or `prompt_ids`, `answer`).
        base: the base model, a local directory or a hub id.
        policies: the policies to run, e.g. `[Base(), RL(), Forward(eps=0.05)]`, as given
            (`settings.parse_policies` is what adds rl-replace's controls at its sampling). A
            `forward` or `reverse` with a `map_table` switches at the positions of that token
            table's trajectory of each response with `js > eps` (`maps.DivergenceMap`; with a
            forced opening, counted from the response's start).
        out: the results: a `.parquet` or `.jsonl` file, or a directory of parts. Written in
            parts, one per chunk of prompts and setting (`divscope.output`), each as soon as it
            is decoded and graded; a file is assembled from them at the end.
        rl: the RL model (not needed by `base` and `rast`).
        budgets: switch budgets of the budgeted policies (−1 = unlimited); the other
            policies (and `early` with a share) run once with budget −1.
        n: responses per prompt (sample ids 0..n−1) per policy and budget.
        config: sampling, length cap, seed and batch size.
        grader: a grader (`math`, `exact`, `lab` or `module:function`); None leaves
            `correct` null.
        grade_timeout: wall-clock seconds to grade one response.
        rast_base: the small base model of `rast`.
        rast_rl: the small RL model of `rast`.
        dtype: weights dtype, `auto`, `float32`, `bfloat16` or `float16`.
        device: `auto`, `cpu`, `cuda` or `cuda:N`.
        device_map: passed to `from_pretrained` for models larger than one GPU.
        base_device: the base model's own device (e.g. `cuda:0`), overriding `device` for it;
            the logits of every model are computed on the base model's device.
        rl_device: the RL model's own device (e.g. `cuda:1`), overriding `device` for it.
        stop: extra stop tokens (ids or single-token strings) besides every model's EOS ids.
        chat_template: wrap each raw question in the base tokenizer's chat template.
        allow_tokenizer_mismatch: compare models whose ordinary vocabularies differ.
        force_prefix: the `forced_policies` also run with every response forced to open with
            this text: its base-tokenizer ids (no special tokens) follow the prompt, decoding
            continues after them, and the rows' `response_ids` start with them (switch
            positions count from the response's start; the prefix does not count towards
            `max_new_tokens`). Their rows have `force_prefix` set: settings of their own.
        forced_policies: the names of the policies that also run forced (every policy of that
            name); None: every policy.
        overwrite: replace an existing output.
        resume: continue an interrupted run (or start it): keep the parts written, after
            checking that the settings and prompts are the same, and do the rest.
        shard: `i/n`: do share i of n of the parts, as one of n independent processes (a SLURM
            array); `out` must then be a directory. Under torchrun each process takes its
            share by itself.
        part_rows: responses per part (a chunk holds ceil(part_rows / n) prompts); fixed by
            the first run of an output.
        progress: show a progress bar (and the length cap note) on stderr.

    Returns:
        The results as written (docs/contracts.md, "Cross-sample results", plus
        `CROSS_SAMPLE_PARAMS`), or None when the output is not complete yet: a share whose
        other shares are still running.

    Raises:
        DivscopeError: bad prompts, budgets or grader, a missing model, models whose ordinary
            vocabularies differ, a forced policy that does not run, a prefix that tokenizes to
            no token (or to a stop token), a map table that is unreadable or lacks a prompt, an
            existing output without `overwrite` or `resume`, or one made with other settings.

    Example (the lab in `fixtures/lab`, from the repository root):
        >>> import tempfile
        >>> import polars as pl
        >>> import divscope
        >>> tmp = tempfile.TemporaryDirectory()
        >>> prompts = f"{tmp.name}/prompts.jsonl"  # the first 2 of the lab's 256 eval prompts
        >>> pl.read_ndjson("fixtures/lab/prompts/eval.jsonl").head(2).write_ndjson(prompts)
        >>> from divscope.decoding.policies import Base, Forward, RL
        >>> results = divscope.cross_sample(
        ...     prompts, base="fixtures/lab/base", rl="fixtures/lab/rl",
        ...     policies=[Base(), RL(), Forward(eps=0.05)], budgets=[4], n=2,
        ...     out=f"{tmp.name}/forward.parquet", grader="lab", progress=False)
        >>> results.group_by("policy", "budget", maintain_order=True).len().rows()
        [('base', -1, 4), ('rl', -1, 4), ('forward', 4, 4)]
        >>> tmp.cleanup()
    """
    from divscope import __version__
    from divscope.decoding.lockstep import planned
    from divscope.distributed import current_world
    from divscope.grading import GradeConfig, get_grader, grade_table
    from divscope.io import cross_sample_frame, read_cross_sample
    from divscope.models.loading import describe_model
    from divscope.models.placement import describe_placement
    from divscope.output import Parts, check_output, frame_digest, share_note
    from divscope.prompts import read_prompts

    world = current_world(shard, device, device_map)
    check_output(out, world)
    if n < 1:
        raise DivscopeError(f"--n must be >= 1, got {n}.")
    if not policies:
        raise DivscopeError("no policy given; pass --policy (e.g. base,rl,forward).")
    budgets = tuple(budgets)
    if not budgets or any(b < -1 for b in budgets):
        raise DivscopeError(f"--budgets {budgets}: give budgets >= 0, or −1 for unlimited.")
    if grader is not None:
        get_grader(grader)  # an unknown grader fails before the models load
    forced = _forced(policies, force_prefix, forced_policies)
    frame = read_prompts(prompts)
    if grader is not None and "answer" not in frame.columns:
        raise DivscopeError(
            f"{prompts}: --grader {grader} needs an 'answer' column in the prompts."
        )
    maps = _maps(policies, frame["prompt_id"])
    paths = {"base": base, "rl": rl, "rast_base": rast_base, "rast_rl": rast_rl}
    needed = [name for name in paths if any(name in decoding_models(p, config) for p in policies)]
    for name in needed:
        if paths[name] is None:
            users = ", ".join(p.name for p in policies if name in p.models)
            who = f"policy {users}" if users else "--delta-alignment (all four models)"
            raise DivscopeError(f"{who} needs {MODEL_FLAGS[name]}.")
    model_paths = {name: paths[name] for name in needed}
    # The units of work: each chunk of prompts under each setting (policy, budget and forced
    # prefix). Every setting decodes the same chunks, so the models see identical batches
    # across settings and the reproduction invariants between policies hold bit for bit.
    runs = [
        (p, b, prefix)
        for ps, prefix in ((policies, None), (forced, force_prefix))
        for p in ps
        for b in (budgets if p.budgeted else (-1,))
    ]
    per_chunk = -(-part_rows // n)  # prompts per chunk
    chunks = [
        range(lo, min(lo + per_chunk, frame.height)) for lo in range(0, frame.height, per_chunk)
    ]
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
        "temperature": config.sampling.temperature,
        "top_p": config.sampling.top_p,
        "max_new_tokens": config.max_new_tokens,
        "head_dtype": config.head_dtype,
        "seed": config.seed,
        "delta_alignment": config.delta_alignment,
        "stop": list(stop),
        "chat_template": chat_template,
        "grader": grader,
        "dtype": dtype,
        "divscope_version": __version__,
    }
    parts = Parts.start(
        out, "cross-sample", settings, len(runs) * len(chunks),
        resume=resume, overwrite=overwrite, world=world,
    )  # fmt: skip
    costs = [len(chunks[u % len(chunks)]) for u in range(len(runs) * len(chunks))]  # prompts
    mine = [] if parts.finished else world.share(costs)
    done = parts.done(mine)
    todo = [u for u in mine if u not in done]
    if todo:
        loaded = load(
            frame,
            str(prompts),
            model_paths,
            dtype=dtype,
            device=world.device(device),
            device_map=device_map,
            base_device=world.device(base_device),
            rl_device=world.device(rl_device),
            stop=stop,
            chat_template=chat_template,
            allow_tokenizer_mismatch=allow_tokenizer_mismatch,
            force_prefix=force_prefix if forced else None,
        )
        keys = frame["prompt_id"].to_list()
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
            "models": {
                name: describe_model(model, paths[name]) for name, model in loaded.models.items()
            },
            "prompts": str(Path(prompts)),
            "policies": [{"policy": p.name, **p.params()} for p in policies],
            "budgets": list(budgets),
            "force_prefix_ids": list(loaded.prefix_ids),
            "batch_size": config.batch_size,  # as planned (`--max-memory`) or given
            **loaded.metadata(),
            "device": describe_placement(
                device, device_map, {"base": base_device, "rl": rl_device}
            ),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        grading = GradeConfig(grader, timeout=grade_timeout) if grader is not None else None
        answers = frame.select("prompt_id", "answer") if grader is not None else None
        pieces = TokenPieces(loaded.tokenizer)  # the switch tokens' text
        benchmarks = (
            dict(zip(keys, frame["benchmark"], strict=True)) if "benchmark" in frame.columns else {}
        )
        rows = n * sum(costs[u] for u in todo)
        shared: dict[tuple[str, str | None, int], list[Decoded]] = {}  # see `_shared_key`
        with Progress(
            rows, desc=f"cross-sampling{share_note(world)}", unit="seq", enabled=progress
        ) as bar:
            for unit in todo:
                policy, budget, prefix = runs[unit // len(chunks)]
                opening = () if prefix is None else loaded.prefix_ids
                requests = [
                    Request(
                        keys[i],
                        sample,
                        (*loaded.prompt_ids[i], *opening),
                        budget,
                        _map_steps(policy, maps, keys[i], sample, len(opening)),
                    )  # fmt: skip
                    for i in chunks[unit % len(chunks)]
                    for sample in range(n)
                ]
                key = _shared_key(policy, budget, prefix, unit % len(chunks))
                decoded = shared.get(key) if key is not None else None
                if decoded is None:
                    decoded = _decode(loaded, requests, policy, config)
                    decoded = [_opened(d, opening) for d in decoded]
                    if key is not None:
                        shared[key] = decoded
                texts = loaded.tokenizer.batch_decode(
                    [d.response_ids for d in decoded], skip_special_tokens=True
                )
                results = _results_frame(
                    policy, requests, decoded, texts, config, pieces=pieces, benchmarks=benchmarks,
                    force_prefix=prefix,
                )  # fmt: skip
                if grading is not None:
                    results = grade_table(results, grading, answers=answers)
                parts.write(unit, cross_sample_frame(results), metadata)
                bar.update(len(requests))
    return read_cross_sample(out) if parts.finish(world) else None


def _maps(policies: Sequence[Policy], prompt_ids: Sequence[str]) -> dict[str, DivergenceMap]:
    """The retrospective maps of `policies` by table, each read once at the smallest eps that
    reads it, and checked to hold every prompt of `prompt_ids`.

    Raises:
        DivscopeError: an unreadable table, or a prompt it has no trajectory of.
    """
    from divscope.decoding.maps import read_map

    floors: dict[str, float] = {}
    for policy in policies:
        table, eps = policy.params().get("map_table"), policy.params().get("eps")
        if table is not None:
            floors[table] = min(eps, floors.get(table, eps))
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
    policy: Policy, budget: int, prefix: str | None, chunk: int
) -> tuple[str, str | None, int] | None:
    """The key under which a unit's decode is shared with other settings, None when it is
    not: `forward` and `reverse` at budget 0 never switch, so they decode the same responses
    (the primary's, with no switch) for every eps, stratum and map; the run decodes each of
    their chunks once and writes it under each setting."""
    if budget != 0 or not isinstance(policy, Forward | Reverse):
        return None
    return policy.name, prefix, chunk


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
    loaded: Loaded, requests: list[Request], policy: Policy, config: DecodeConfig
) -> list[Decoded]:
    """Decode `requests` under `policy`. `early` with a share first decodes the same requests
    under `Base()` (same requests, same batches: exactly the base control's tokens), and gives
    each request the budget `Early.budget_for` that base response's length."""
    from divscope.decoding.lockstep import decode

    def run(requests: list[Request], policy: Policy, config: DecodeConfig) -> list[Decoded]:
        return decode(
            loaded.models, requests, policy, config, vocab=loaded.vocab, eos_ids=loaded.stop,
            pad_id=loaded.pad_id, suppressed=loaded.suppressed,
        )  # fmt: skip

    if isinstance(policy, Early) and policy.share is not None:
        base = run(requests, Base(), replace(config, delta_alignment=False))
        requests = [
            replace(r, budget=policy.budget_for(len(d.response_ids)))
            for r, d in zip(requests, base, strict=True)
        ]
    return run(requests, policy, config)


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


@dataclass(frozen=True)
class Loaded:
    """The models of a decoding run, their shared vocabulary and the prompts' token ids."""

    tokenizer: Any
    """The first model's tokenizer: it tokenizes the prompts and decodes the responses."""
    prompt_ids: list[list[int]]
    """Each prompt's token ids (chat-templated with `chat_template`)."""
    models: dict[str, Any]
    """The loaded models by name, in one dtype."""
    stop: list[int]
    """Every id that ends a response (`models.tokenizers.stop_ids`)."""
    compatibility: Compatibility | None
    """What the tokenizers share (None: one model): the `suppressed` ids are never emitted."""
    vocab: int
    """The ids every model's tokenizer holds: `compatibility.vocab`, or the one tokenizer's
    size."""
    prefix_ids: tuple[int, ...] = ()
    """The ids of the forced opening (`force_prefix`); empty when none."""

    @property
    def suppressed(self) -> tuple[int, ...]:
        """Ids never emitted: added/special tokens that the tokenizers do not share, except
        stop tokens (a twin's own `<|im_end|>` must still end its responses)."""
        differing = self.compatibility.suppressed if self.compatibility else ()
        return tuple(i for i in differing if i not in self.stop)

    @property
    def pad_id(self) -> int:
        """The id of left padding (masked): the tokenizer's pad token, else the first stop."""
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None and pad < self.vocab else self.stop[0]

    def metadata(self) -> dict[str, Any]:
        """The stop tokens, the tokenizers' agreement and the dtype, for the output."""
        return {
            "stop": [
                {"id": i, "token": self.tokenizer.convert_ids_to_tokens(i)} for i in self.stop
            ],
            "tokenizers": self.compatibility.metadata() if self.compatibility else None,
            "dtype_resolved": str(next(iter(self.models.values())).dtype).removeprefix("torch."),
        }


def load(
    frame: pl.DataFrame,
    source: str,
    paths: dict[str, str],
    *,
    dtype: str,
    device: str,
    device_map: str | None,
    base_device: str | None = None,
    rl_device: str | None = None,
    stop: Sequence[str] = (),
    chat_template: bool = False,
    allow_tokenizer_mismatch: bool = False,
    force_prefix: str | None = None,
) -> Loaded:
    """Load what a decoding run needs; the prompts, tokenizers and forced prefix are checked
    before any model loads.

    Args:
        frame: prompts as `prompts.read_prompts` returns them.
        source: the prompts file, for error messages.
        paths: model name -> local directory or hub id; the first model's tokenizer is used.
        dtype: weights dtype of every model (`models.placement.run_dtype`).
        device: `auto`, `cpu`, `cuda` or `cuda:N`.
        device_map: passed to `from_pretrained`.
        base_device: the base model's own device, overriding `device` for it.
        rl_device: the RL model's own device, overriding `device` for it.
        stop: extra stop tokens (`--stop`: ids or single-token strings).
        chat_template: wrap each raw question in the first tokenizer's chat template.
        allow_tokenizer_mismatch: compare models whose ordinary vocabularies differ.
        force_prefix: a forced opening, tokenized with the first tokenizer without special
            tokens into `Loaded.prefix_ids`.

    Raises:
        DivscopeError: a prompt that the tokenizer cannot hold, tokenizers whose ordinary
            vocabularies differ, a forced prefix that tokenizes to no token or holds a stop
            token or an id outside the shared vocabulary, a model that cannot be loaded, or a
            bad `--stop`.
    """
    from divscope.models.loading import load_models
    from divscope.models.tokenizers import load_tokenizer, stop_ids
    from divscope.prompts import chat_prompts, prompt_token_ids
    from divscope.vocab import check_tokenizers

    tokenizers = {name: load_tokenizer(path) for name, path in paths.items()}
    tokenizer = next(iter(tokenizers.values()))
    compatibility = (
        check_tokenizers(tokenizers, allow_mismatch=allow_tokenizer_mismatch)
        if len(tokenizers) > 1
        else None
    )
    if chat_template:
        prompt_ids = chat_prompts(frame, tokenizer, source=source)[1]
    else:
        prompt_ids = prompt_token_ids(frame, tokenizer, source=source)
    vocab = compatibility.vocab if compatibility else len(tokenizer)
    prefix_ids: tuple[int, ...] = ()
    if force_prefix is not None:
        prefix_ids = tuple(tokenizer.encode(force_prefix, add_special_tokens=False))
        if not prefix_ids:
            raise DivscopeError(
                f"--force-prefix {force_prefix!r} tokenizes to no token; give text that the "
                "base tokenizer turns into at least one token."
            )
    own = {"base": base_device, "rl": rl_device}
    models = load_models(paths, dtype=dtype, device=device, device_map=device_map, devices=own)
    stop_list = stop_ids(tokenizers, models, stop, vocab=vocab)
    bad = [i for i in prefix_ids if i in stop_list or i >= vocab]
    if bad:
        raise DivscopeError(
            f"--force-prefix {force_prefix!r} tokenizes to {list(prefix_ids)}, which holds "
            f"id {bad[0]}, a stop token or an id outside the shared vocabulary of {vocab}; "
            "a forced opening cannot end the response."
        )
    return Loaded(tokenizer, prompt_ids, models, stop_list, compatibility, vocab, prefix_ids)


def note_length_cap(
    keys: list[str], prompt_ids: list[list[int]], max_new_tokens, models, *, enabled: bool
) -> None:
    """Print once, on stderr, how the default length cap was capped by a model's context."""
    from divscope.models.lengths import context_length, length_note
    from divscope.progress import note

    prompts = list(zip(keys, prompt_ids, strict=True))
    contexts = {name: context_length(model) for name, model in models.items()}
    note(length_note(prompts, max_new_tokens, contexts), enabled=enabled)


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
) -> pl.DataFrame:
    """The results rows of one decoded unit (every `CROSS_SAMPLE` column, `correct` null, then
    `CROSS_SAMPLE_PARAMS`).

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
    params: dict[str, Any] = {c: None for c in CROSS_SAMPLE_PARAMS}
    params |= {"temperature": config.sampling.temperature, "top_p": config.sampling.top_p}
    params |= {"max_new_tokens": config.max_new_tokens}
    params |= {k: v for k, v in policy.params().items() if k != "eps"}
    params["force_prefix"] = force_prefix
    eps = policy.params().get("eps")
    rows = len(requests)
    frame = pl.DataFrame(
        {
            "prompt_id": [r.prompt_id for r in requests],
            "sample_id": [r.sample_id for r in requests],
            "policy": [policy.name] * rows,
            "budget": [r.budget for r in requests],
            "eps": pl.Series([eps] * rows, dtype=pl.Float64()),
            "seed": [config.seed] * rows,
            "response_ids": [d.response_ids for d in decoded],
            "response": texts,
            "n_tokens": [len(d.response_ids) for d in decoded],
            "n_switches": [d.n_switches for d in decoded],
            "n_effective": [d.n_effective for d in decoded],
            "switch_positions": pl.Series(
                [d.switch_positions for d in decoded], dtype=pl.List(pl.Int32())
            ),
            "switch_primary_ids": pl.Series(
                [d.switch_primary_ids for d in decoded], dtype=pl.List(pl.Int32())
            ),
            "switch_primary_tokens": pl.Series(
                [pieces(d.switch_primary_ids) for d in decoded], dtype=pl.List(pl.String())
            ),
            "switch_tokens": pl.Series(
                [pieces([d.response_ids[p] for p in d.switch_positions]) for d in decoded],
                dtype=pl.List(pl.String()),
            ),
            "switch_js": pl.Series([d.switch_js for d in decoded], dtype=pl.List(pl.Float32())),
            "n_effective_independent": [d.n_effective_independent for d in decoded],
            "delta_cosine": pl.Series(
                [d.delta_cosine for d in decoded], dtype=pl.List(pl.Float32())
            ),
            "benchmark": pl.Series(
                [benchmarks.get(r.prompt_id) for r in requests], dtype=pl.String()
            ),
            "finished": [d.finished for d in decoded],
            "correct": pl.Series([None] * rows, dtype=pl.Boolean()),
        }
    )
    return frame.with_columns(
        pl.lit(params[c], dtype=t).alias(c) for c, t in CROSS_SAMPLE_PARAMS.items()
    )
