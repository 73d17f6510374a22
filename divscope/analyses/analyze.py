"""`analyze`: a token table (and optional comparisons) in, the `Summary` as JSON on disk out.

What `divscope analyze` runs: `summary` over the tables read from files, written atomically
with the token table's provenance; `divscope.formatting.digest` is the text the command prints.
Unlike the other analyses, `analyze` reads and writes files.
"""

from __future__ import annotations

from typing import Annotated

from divscope.analyses.study import Study
from divscope.analyses.summary import Metrics, Summary, summary
from divscope.errors import DivscopeError
from divscope.params import Flag, Output, Recovery


def analyze(
    study: Annotated[Study, Flag(omit=("prompts", "system_prompt"))],
    out: Output | None = None,
    metrics: Metrics = Metrics(),  # noqa: B008 (frozen, hashable)
    recovery: Recovery = Recovery(),  # noqa: B008 (frozen, hashable)
    differences: Annotated[tuple[str, ...], Flag("--difference")] = (),
) -> Summary:
    """Summarize a token table paper by paper and write the summary as JSON.

    Where the RL model departs from the base, each statistic as its paper computes it: the core
    paper's (Sparse but Critical; sparsity, position, entropy, top-k overlap, rank reordering, tail
    promotion, word frequencies) on js and the RL model's trajectories, the takeover paper's
    (Lorenz/Gini, early density, planning words, failure AUROC, IoU with base entropy) on
    ce_base_rl and base rollouts, and RAST's path coverage on RL trajectories (the `source`
    column; --population overrides; where a population is absent, each section is computed on
    what is there and says so); with --compare, side-by-side sparsity, each side naming its
    trajectories; with --cross-sample, the cross-sample report (recovery per
    setting, pass@k, majority@k, flips, differences, recovery and effective/total switches per
    eps, and with `switch_js` the share of switch positions still above eps online); with
    --difficulty, sparsity, position and (with --cross-sample) recovery per tertile of the base
    model's pass@1 (prompts of equal pass@1 share a tertile), with easy - hard differences and
    problem-bootstrap intervals.

    The JSON holds `tokens` (the path), `metadata` (the token table's `divscope` metadata, or
    null when it has none) and every field of the `Summary`: `n_tokens`, `n_responses`,
    `n_prompts` (of the whole table), the sections `core`, `takeover` and `rast` (each with its
    metric, paper and `population`: the trajectories it read, their counts, and a note when
    they are not the paper's),
    `cross_sample` (null without results) and `difficulty` (null without `difficulty`),
    frames as lists of rows and NaN as null; run from the command line, also `invocation` (the
    command line as resolved, which `divscope config` writes back as a study file).

    Args:
        study: the token table and what it is read with (`Study`; a path: the token table
            alone): the --compare tables for side-by-side sparsity, the cross-sample results
            and reference for accuracy and recovery, the graded base responses whose
            per-prompt pass@1 tertiles (`difficulty_tertiles`) split the statistics.
        out: the JSON file (`Output`; a path: without overwrite), written atomically.
        metrics: each section's divergence column and population (`Metrics`).
        recovery: how recovery and every interval are estimated (`Recovery`).
        differences: two settings of --cross-sample to compare, "A - B", each side
            column=value[,column=value] (e.g. "policy=rl-replace - policy=base-greedy"): their
            difference with a paired problem-bootstrap CI (repeat).

    Returns:
        The `Summary` as written. In Python (docs/python.md, "Notebooks"), the study's
        tables may also be in memory (`Study.of`: a token table alone, e.g. what
        `score(out=None)` returns), and with `out=None` nothing is written.

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
    from divscope.io import read_metadata
    from divscope.output import check_target, with_invocation, write_json

    study = Study.of(study)
    out = None if out is None else Output.of(out)
    if out is not None:
        check_target(out.path, overwrite=out.overwrite)
    tables = study.tables
    result = summary(
        tables.tokens,
        metrics,
        recovery,
        label=study.name,
        compare_with=tables.compare,
        cross_sample=tables.cross_sample,
        reference=tables.reference,
        differences=tuple(differences),
        difficulty=tables.difficulty,
        roles=tables.roles,
    )
    if out is None:
        return result
    try:
        metadata = read_metadata(study.tokens)
    except DivscopeError:
        metadata = None
    document = {"tokens": str(study.tokens), "metadata": metadata, **result.to_dict()}
    document = with_invocation(document)
    write_json(document, out.path, overwrite=out.overwrite)
    return result
