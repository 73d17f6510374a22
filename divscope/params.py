"""The parameter groups that the commands share, each a small frozen dataclass named for its
concept, and `Flag`, how a parameter reads on the command line.

A command's library entry point takes a few parameters, most of them groups: `ModelPair` (the
models and where they run; `SinglePlacement` where one model runs), `Output` or `PartedOutput`
(where the result goes), `Recovery` (how recovery is estimated). The command line is generated
from those signatures (`divscope.cli.command`): each field is an option named after it
(`allow_tokenizer_mismatch` -> `--allow-tokenizer-mismatch`), its default is the field's default
and its help is the field's docstring. So an option, its default and its help have one home:
here, or in the configuration class that holds it.

>>> pair = ModelPair("fixtures/lab/base", "fixtures/lab/rl")
>>> pair.placement.device, Output.of("tokens.parquet").path.name
('auto', 'tokens.parquet')
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from divscope.defaults import DEVICE, DTYPE, N_BOOT, SEED
from divscope.errors import DivscopeError


class Flag:
    """How a parameter or field reads on the command line, where its name alone does not say.

    Put it in the annotation: `batch_size: Annotated[int | None, Flag(min=1)] = None`. The help
    text is never here: it is the field's docstring (or the function's `Args:` entry).

    Args:
        names: option names, e.g. "--out", "-o"; default: the parameter's name, `_` -> `-`.
        argument: a positional argument instead of an option.
        min: the smallest value the command line accepts.
        max: the largest value the command line accepts.
        metavar: how the value is shown in the help, e.g. `EPS[,EPS...]`.
        parse: turns the option's text into the value (e.g. "0,1,2" -> (0, 1, 2)); the option
            is then a string on the command line, and its default is shown joined by commas.
        cli: False: the parameter is the library's only (a callback, a progress switch).
        omit: of a group parameter, the fields (by name, nested ones too) that get no option
            in this command: they keep the default instance's values (e.g. calibrate's
            `--window` is the gates', not the sampling's).
        described: of a group's field, the option whose help is the command's own `Args:`
            entry for the group's parameter where it has one (what `--out` holds differs from
            command to command); the field's docstring otherwise.
        replay: False: the option is about the run, not its result (`--overwrite`, `--resume`,
            `--shard`), and is left out of the invocation an output records
            (`divscope config`).

    >>> Flag("--out", "-o").names
    ('--out', '-o')
    """

    def __init__(
        self,
        *names: str,
        argument: bool = False,
        min: float | None = None,  # noqa: A002 (click's name)
        max: float | None = None,  # noqa: A002 (click's name)
        metavar: str | None = None,
        parse: Callable[[str], Any] | None = None,
        cli: bool = True,
        omit: tuple[str, ...] = (),
        described: bool = False,
        replay: bool = True,
    ) -> None:
        self.names = names
        self.argument = argument
        self.min = min
        self.max = max
        self.metavar = metavar
        self.parse = parse
        self.cli = cli
        self.omit = omit
        self.described = described
        self.replay = replay

    def __repr__(self) -> str:
        default = vars(Flag())
        shown = {k: v for k, v in vars(self).items() if v != default[k] or k == "cli"}
        return f"Flag({shown})"


LIBRARY_ONLY = Flag(cli=False)
"""The annotation of a parameter that has no option (a callback, a progress switch)."""
RUN_ONLY = Flag(replay=False)
"""The annotation of an option about the run, not its result (`--overwrite`, `--resume`): a
study file written back from an output leaves it out (`divscope config`)."""
DecoderName = Literal["speculative", "reference"]
"""The lockstep decoders (`--decoder` of `cross-sample` and `generate`): the speculative one
and the step-by-step reference it is tested against (docs/contracts.md)."""
DECODERS: tuple[str, ...] = get_args(DecoderName)


def check_decoder(decoder: str) -> None:
    """Raise unless `decoder` is one of `DECODERS` (`--decoder`).

    >>> check_decoder("fast")
    Traceback (most recent call last):
    divscope.errors.DivscopeError: --decoder must be one of speculative, reference, got 'fast'.
    """
    if decoder not in DECODERS:
        raise DivscopeError(f"--decoder must be one of {', '.join(DECODERS)}, got {decoder!r}.")


@dataclass(frozen=True)
class SinglePlacement:
    """Where and in which dtype one model runs (`generate`'s model).

    >>> SinglePlacement(device="cpu").dtype
    'auto'
    """

    dtype: str = DTYPE
    """Weights dtype: auto (float32 on CPU, the checkpoint's half precision on GPU), float32,
    bfloat16 or float16."""
    device: str = DEVICE
    """auto (CUDA when present), cpu, cuda or cuda:N."""
    device_map: str | None = None
    """Passed to from_pretrained (e.g. auto) to spread a large model over GPUs; overrides
    --device (needs pip install 'divscope[big]')."""


@dataclass(frozen=True)
class Placement(SinglePlacement):
    """Where and in which dtype a model pair runs: one placement for both, or a device each.

    >>> Placement(device="cpu").dtype, Placement(rl_device="cuda:1").device
    ('auto', 'auto')
    """

    base_device: str | None = None
    """Device of the base model, e.g. cuda:0 (overrides --device for it); the statistics are
    computed on the base model's device."""
    rl_device: str | None = None
    """Device of the RL model, e.g. cuda:1 (overrides --device for it); the statistics are
    computed on the base model's device."""


@dataclass(frozen=True)
class ModelPair:
    """The base model, its RL twin (each at a revision), where they run and how their
    vocabularies are checked.

    >>> ModelPair("Qwen/Qwen2.5-Math-7B", "sail/Qwen2.5-Math-7B-Oat-Zero").rl
    'sail/Qwen2.5-Math-7B-Oat-Zero'
    """

    base: str
    """Base model: a local directory or a hub id (ID@REVISION, ID/SUBFOLDER too)."""
    rl: str | None = None
    """RL-fine-tuned model: a local directory or a hub id; ID@REVISION names a branch, tag or
    commit (org/run@step-400, an intermediate checkpoint), ID/SUBFOLDER a folder of it."""
    placement: Placement = Placement()
    """Devices and dtypes."""
    allow_tokenizer_mismatch: bool = False
    """Compare models whose ordinary vocabularies differ (experts only): at the ids whose
    tokens differ the divergences compare different strings."""
    base_revision: str | None = None
    """Hub branch, tag or commit of --base (the same as --base ID@REVISION)."""
    rl_revision: str | None = None
    """Hub branch, tag or commit of --rl (the same as --rl ID@REVISION)."""
    subfolder: str | None = None
    """Folder of --rl's repository or directory that holds the model, e.g. step-400 (an
    intermediate checkpoint); the tokenizer is read from it, else from the root."""


@dataclass(frozen=True)
class Output:
    """Where a command writes its result, and whether it may replace one.

    >>> Output.of("summary.json") == Output(Path("summary.json"))
    True
    """

    path: Annotated[Path, Flag("--out", "-o", described=True)]
    """Where to write the result (its format follows the suffix)."""
    overwrite: Annotated[bool, RUN_ONLY] = False
    """Replace the output if it exists."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @classmethod
    def of(cls, out: str | os.PathLike | Output) -> Output:
        """`out` as this class: an output as it is, a path with the defaults."""
        return out if isinstance(out, cls) else cls(Path(out))


@dataclass(frozen=True)
class PartedOutput(Output):
    """An output written in parts as they are done, which a run can resume or share out.

    >>> PartedOutput.of("tokens").resume
    False
    """

    resume: Annotated[bool, RUN_ONLY] = False
    """Continue an interrupted run (or start it): keep the finished parts of --out, after
    checking that its manifest has the same settings and inputs, and do the rest."""
    shard: Annotated[str | None, RUN_ONLY] = None
    """i/n: do share i (0..n-1) of the work, as one of n independent processes (e.g. --shard
    $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT); --out must be a directory. Not needed under
    torchrun, which shares the work by itself."""


@dataclass(frozen=True)
class Chat:
    """How the prompts become chat prompts: the tokenizer's chat template and a system prompt,
    applied in one place (`prompts.template_messages`) by every command that reads prompts.

    A `messages` column always goes through the template; a `prompt` column with
    `chat_template`; `prompt_ids` never.

    >>> Chat(system_prompt="Reason step by step.").chat_template
    False
    """

    chat_template: bool = False
    """Wrap each raw question of the prompts' `prompt` column in the tokenizer's chat template,
    as one user turn (a `messages` column is templated without it)."""
    system_prompt: str | None = None
    """A system turn put first in every chat prompt that has none (needs --chat-template or a
    `messages` column in the prompts)."""


@dataclass(frozen=True)
class Recovery:
    """How recovery and its intervals are estimated from graded responses: the measure, the
    controls that bound it, and the bootstrap. Its upper bound, an input, is the `Study`'s
    `reference`.

    >>> Recovery().n_boot, Recovery(recovery_at=8).recovery_at
    (1000, 8)
    """

    recovery_at: Annotated[int | None, Flag(min=1)] = None
    """Recovery on unbiased pass@K per prompt (the takeover paper: --recovery-at 8); default:
    on mean@n (the core paper)."""
    base_policy: Annotated[str | None, LIBRARY_ONLY] = "base"
    """The policy label of the lower bound (the base control); None: no recovery."""
    rl_policy: Annotated[str, LIBRARY_ONLY] = "rl"
    """The policy label of the default upper bound (the rl control)."""
    n_boot: Annotated[int, Flag(min=1)] = N_BOOT
    """Bootstrap resamples."""
    seed: int = SEED
    """Seed of every bootstrap (and of the figures' and the token viewer's samples)."""
    confidence: Annotated[float, LIBRARY_ONLY] = 0.95
    """Coverage of the intervals."""


__all__ = [
    "LIBRARY_ONLY",
    "Chat",
    "Flag",
    "ModelPair",
    "Output",
    "PartedOutput",
    "Placement",
    "RUN_ONLY",
    "Recovery",
    "SinglePlacement",
]
