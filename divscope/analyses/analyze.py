"""`analyze`: a token table (and optional comparisons) in, the `Summary` as JSON on disk out.

What `divscope analyze` runs: `summary` over the tables read from files, written atomically
with the token table's provenance; `divscope.formatting.digest` is the text the command prints.
Unlike the other analyses, `analyze` reads and writes files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from divscope.analyses.difficulty import difficulty_tertiles
from divscope.analyses.summary import Summary, summary
from divscope.defaults import CORE_METRIC, N_BOOT, SEED, TAKEOVER_METRIC
from divscope.errors import DivscopeError


def analyze(
    tokens: str | os.PathLike,
    out: str | os.PathLike,
    *,
    compare: Mapping[str, str | os.PathLike] | None = None,
    cross_sample: str | os.PathLike | None = None,
    reference: str | os.PathLike | None = None,
    recovery_at: int | None = None,
    differences: Sequence[str] | None = None,
    difficulty: str | os.PathLike | None = None,
    difficulty_model: str | None = None,
    metric: str | None = None,
    core_metric: str = CORE_METRIC,
    takeover_metric: str = TAKEOVER_METRIC,
    rescale_thresholds: bool = False,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    overwrite: bool = False,
) -> Summary:
    """Summarize a token table paper by paper and write the summary as JSON.

    The JSON holds `tokens` (the path), `metadata` (the token table's `divscope` metadata, or
    null when it has none) and every field of the `Summary`: `n_tokens`, `n_responses`,
    `n_prompts`, the sections `core`, `takeover` and `rast` (each with its metric and paper),
    `cross_sample` (null without results) and `difficulty` (null without `difficulty`),
    frames as lists of rows and NaN as null.

    Args:
        tokens: the token table (a .parquet file or a directory of parts).
        out: the JSON file, written atomically.
        compare: label -> another token table on the same trajectories (e.g. the SFT control),
            for side-by-side sparsity; `tokens` is labelled by its file name.
        cross_sample: cross-sample results (Parquet or JSONL) for accuracy and recovery.
        reference: the upper bound of recovery: an existing file of graded responses of a third
            model (read with `read_table`), else a policy label of the results; default the
            matched `rl` control.
        recovery_at: recovery on pass@k at this k instead of mean@n.
        differences: pairs of settings to compare with paired CIs, "A - B" with each side
            column=value[,column=value], e.g. "policy=rl-replace - policy=base-greedy".
        difficulty: graded base responses (`divscope grade` output, or cross-sample results
            with the `base` control) whose per-prompt pass@1 tertiles (`difficulty_tertiles`)
            split the statistics (`by_difficulty`; recovery too with `cross_sample`).
        difficulty_model: the base model's `model` value when `difficulty` holds several
            models' responses.
        metric: the divergence column of both sections; overrides `core_metric` and
            `takeover_metric` when given.
        core_metric: the core paper's statistics' column.
        takeover_metric: the takeover paper's statistics' column.
        rescale_thresholds: carry the core paper's JS thresholds to a non-JS core metric at
            the same quantile instead of refusing.
        n_boot: bootstrap resamples of every interval.
        seed: seed of every bootstrap.
        overwrite: replace an existing `out`.

    Returns:
        The `Summary` as written.

    Raises:
        DivscopeError: an existing `out` without `overwrite`, a missing table, file or column,
            or JS thresholds on another core metric without `rescale_thresholds`.

    Example (`lab_tokens`: the token table of the lab's first 8 trajectories, see conftest.py):
        >>> import tempfile
        >>> import divscope
        >>> tmp = tempfile.TemporaryDirectory()
        >>> result = divscope.analyze(lab_tokens, f"{tmp.name}/summary.json")
        >>> result.n_responses, result.core.metric, result.takeover.metric
        (8, 'js', 'ce_base_rl')
        >>> tmp.cleanup()
    """
    from divscope.io import (
        read_metadata,
        read_reference,
        read_table,
        scan_token_table,
        table_name,
        write_json,
    )
    from divscope.output import check_target

    check_target(out, overwrite=overwrite)
    result = summary(
        scan_token_table(tokens),
        metric,
        core_metric=core_metric,
        takeover_metric=takeover_metric,
        rescale_thresholds=rescale_thresholds,
        label=table_name(tokens),
        compare_with={name: scan_token_table(path) for name, path in (compare or {}).items()},
        cross_sample=read_table(cross_sample) if cross_sample is not None else None,
        reference=read_reference(reference),
        recovery_at=recovery_at,
        differences=tuple(differences or ()),
        difficulty=None
        if difficulty is None
        else difficulty_tertiles(read_table(difficulty), model=difficulty_model),
        n_boot=n_boot,
        seed=seed,
    )
    try:
        metadata = read_metadata(tokens)
    except DivscopeError:
        metadata = None
    document = {"tokens": str(tokens), "metadata": metadata, **result.to_dict()}
    write_json(document, out, overwrite=overwrite)
    return result
