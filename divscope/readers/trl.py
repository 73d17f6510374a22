"""TRL's GRPO completion logs: `GRPOConfig(log_completions=True)` writes
`<output_dir>/completions/completions_<step>.parquet` at every logging step (upstream:
huggingface/trl, `trl/trainer/grpo_trainer.py`, `GRPOTrainer.log`).

One row per completion: `step`, `prompt` (the templated prompt decoded with
`skip_special_tokens=True`, so a chat template's special tokens are gone), `completion`, one
column per reward function (named after it, e.g. `accuracy_reward`), the columns the reward
functions logged with `log_extra`, then `advantage`. The rows of one prompt are its
`num_generations` completions.

Mapping: `prompt_id` is a digest of the prompt's text (the log has no index; the same prompt gets
the same id in every step's file), `sample_id` the completion's rank among the rows of its
prompt in file order, `completion` -> `response`; `step`, the rewards, the extras and
`advantage` are kept. `correct` is the truth (`divscope.readers.truth`) of `accuracy_reward` (TRL's
`trl.rewards.accuracy_reward`), else of the only reward column; with several rewards and none of
that name, the file is left ungraded: `--correct COLUMN` names the reward to use.
"""

from __future__ import annotations

import pyarrow as pa

from . import Format, ReadContext, prompt_key, truth

_FIXED = ("step", "prompt", "completion", "advantage")
"""The columns TRL writes besides the rewards and extras."""

_ACCURACY = "accuracy_reward"


def _correct_column(raw: pa.Table, ctx: ReadContext) -> str | None:
    """The reward column whose truth is `correct`: `--correct`, `accuracy_reward`, or the only
    column between `completion` and `advantage` (TRL writes the rewards there, then extras)."""
    from ..errors import DivscopeError

    names = raw.column_names
    if ctx.correct is not None:
        if ctx.correct not in names:
            others = [n for n in names if n not in _FIXED]
            raise DivscopeError(
                f"{ctx.source}: --correct {ctx.correct!r} is not a column of this TRL log; its "
                f"reward and extra columns are {others}."
            )
        return ctx.correct
    if _ACCURACY in names:
        return _ACCURACY
    between = names[names.index("completion") + 1 : names.index("advantage")]
    return between[0] if len(between) == 1 else None


def read(raw: pa.Table, ctx: ReadContext) -> pa.Table:
    """A TRL completion log -> trajectory columns (see the module's docstring)."""
    prompts = raw.column("prompt").to_pylist()
    prompt_ids = [prompt_key(p) for p in prompts]
    seen: dict[str, int] = {}
    sample_ids = []
    for pid in prompt_ids:
        sample_ids.append(seen.get(pid, 0))
        seen[pid] = sample_ids[-1] + 1
    columns = {
        "prompt_id": pa.array(prompt_ids, pa.large_string()),
        "sample_id": pa.array(sample_ids, pa.int32()),
        "prompt": raw.column("prompt"),
        "response": raw.column("completion"),
    }
    graded = _correct_column(raw, ctx)
    if graded is not None:
        columns["correct"] = truth(raw.column(graded), graded, ctx.source)
    for name in raw.column_names:
        if name not in columns and name != "completion":
            columns[name] = raw.column(name)
    return pa.table(columns)


FORMAT = Format(
    name="trl",
    expected=("step", "prompt", "completion", "advantage"),
    read=read,
    applies_correct=True,
)
