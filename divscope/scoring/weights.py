"""`weights`: the weight-level relative gap ratio σ between a base model and its tuned twins.

What `divscope weights` runs (the core paper's App. A.3, Table 3; its summary gives no formula,
so divscope defines it, docs/contracts.md, "Weight gap ratio"):

    σ = ||θ_tuned − θ_base||₂ / ||θ_base||₂

over every tensor of the checkpoints (Euclidean norms of all tensors joined into one vector),
accumulated in float64. Each row of the table is the same ratio over one part of the model: a
numbered block (`model.layers.0`: everything under the path up to its first numeric component)
or, outside the blocks, one module (`model.embed_tokens`, `model.norm`, `lm_head`).

Checkpoints are read tensor by tensor, in slices of at most `CHUNK_ELEMENTS` elements, from
safetensors files (`safe_open`, memory-mapped; a sharded `model.safetensors.index.json` too), so
a 32B pair needs a few hundred MiB, never a model in memory.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import torch
from safetensors import SafetensorError, safe_open

from divscope.errors import DivscopeError
from divscope.output import check_target, with_invocation, write_json
from divscope.params import LIBRARY_ONLY, RUN_ONLY, Flag
from divscope.progress import Progress

CHUNK_ELEMENTS = 2**24
"""Elements of one tensor read at a time: two float64 copies (128 MiB each) and the raw slices
are held at once."""
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
DEFINITION = "sigma = ||theta_tuned - theta_base||_2 / ||theta_base||_2 (float64)"
# The path of a parameter up to its first numeric component: `model.layers.12`.
_BLOCK = re.compile(r"^(.*?\.\d+)\.")


@dataclass(frozen=True)
class GapRow:
    """The norms behind σ over one part of the model (or over all of it: `total`)."""

    name: str
    """`model.layers.0`, `model.embed_tokens`, ... or `total`."""
    n_params: int
    """Parameters (elements) of the part."""
    base_norm: float
    """||θ_base||₂ over the part."""
    diff_norms: dict[str, float]
    """||θ_tuned − θ_base||₂ over the part, per tuned model's label."""

    def sigma(self, label: str) -> float:
        """σ of the tuned model `label` over this part; nan where the base weights are all 0.

        >>> GapRow("model.layers.0", 3, base_norm=5.0, diff_norms={"rl": 0.01}).sigma("rl")
        0.002
        """
        base, diff = self.base_norm, self.diff_norms[label]
        return diff / base if base else math.nan


@dataclass(frozen=True)
class WeightGap:
    """What `divscope weights` prints and writes: σ per part of the model and in total."""

    base: str
    """The base checkpoint, as given."""
    tuned: dict[str, str]
    """The tuned checkpoints by label, as given, in order."""
    rows: tuple[GapRow, ...]
    """One row per part: embeddings first, numbered blocks in numeric order, then the other
    modules by name, output heads last."""
    total: GapRow
    """All tensors together."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of `--json` (docs/contracts.md, "Weight gap ratio"); an undefined
        σ (base norm 0) is null."""

        def row(part: GapRow) -> dict[str, Any]:
            sigmas = {label: part.sigma(label) for label in self.tuned}
            return {
                "name": part.name,
                "n_params": part.n_params,
                "base_norm": part.base_norm,
                "diff_norm": dict(part.diff_norms),
                "sigma": {k: None if math.isnan(v) else v for k, v in sigmas.items()},
            }

        return {
            "definition": DEFINITION,
            "base": self.base,
            "tuned": dict(self.tuned),
            "total": row(self.total),
            "rows": [row(part) for part in self.rows],
        }

    def to_text(self) -> str:
        """The table `divscope weights` prints: one row per part and the total, one σ column
        per tuned model (4 significant digits)."""
        labels = list(self.tuned)
        width = max(len(part.name) for part in (*self.rows, self.total))
        columns = [max(10, len(label)) for label in labels]
        lines = [
            f"σ = ||θ_tuned − θ_base||₂ / ||θ_base||₂ (float64) against {self.base}: "
            + ", ".join(f"{label} = {path}" for label, path in self.tuned.items()),
            f"{'part':<{width}}  {'parameters':>13}"
            + "".join(f"  {label:>{w}}" for label, w in zip(labels, columns, strict=True)),
        ]
        for part in (*self.rows, self.total):
            lines.append(
                f"{part.name:<{width}}  {part.n_params:>13,}"
                + "".join(
                    f"  {part.sigma(label):>#{w}.4g}"
                    for label, w in zip(labels, columns, strict=True)
                )
            )
        return "\n".join(lines)


def weights(
    base: str | os.PathLike,
    tuned: tuple[str | os.PathLike, ...],
    *,
    labels: Annotated[tuple[str, ...], Flag("--label")] = (),
    out: Annotated[str | os.PathLike | None, Flag("--json")] = None,
    overwrite: Annotated[bool, RUN_ONLY] = False,
    chunk_elements: Annotated[int, LIBRARY_ONLY] = CHUNK_ELEMENTS,
    progress: Annotated[bool, LIBRARY_ONLY] = True,
) -> WeightGap:
    """The relative gap ratio σ of each tuned model to the base, per part and in total.

    Prints σ = ||θ_tuned − θ_base||₂ / ||θ_base||₂ per layer and in total, per TUNED model: norms
    over every tensor of the checkpoints, accumulated in float64; a row per numbered block
    (model.layers.N) and per module outside them (embeddings, final norm, lm_head). Tensors are
    streamed from safetensors one slice at a time, so 32B pairs fit in a few hundred MiB.

    Args:
        base: Base checkpoint: a local directory with model.safetensors or a sharded
            model.safetensors.index.json, or that file.
        tuned: Fine-tuned checkpoints of the same architecture (e.g. RL and SFT; same forms),
            each with the base's tensor names and shapes.
        labels: Label of each TUNED checkpoint, in order (default: its directory's name).
        out: Also write the norms and σ of every part as JSON (`WeightGap.to_dict`); None
            writes nothing.
        overwrite: Replace the output if it exists.
        chunk_elements: elements of a tensor read at a time (bounds the memory).
        progress: show progress on stderr.

    Returns:
        The norms and σ of every part and of the whole model.

    Raises:
        DivscopeError: no tuned model, more labels than tuned models or a label twice; a path
            with no safetensors checkpoint; a shard named by an index that is missing; a tensor
            in one checkpoint but not the other; a tensor whose shapes differ; an existing `out`
            without `overwrite`.

    Example (the lab, from the repository root):

    >>> gap = weights(
    ...     "fixtures/lab/base", ("fixtures/lab/rl", "fixtures/lab/sft"), progress=False)
    >>> gap.total.sigma("rl") < gap.total.sigma("sft")
    True
    """
    names = tuned_labels(tuned, labels)
    if out is not None:
        check_target(out, overwrite=overwrite)
    with ExitStack() as stack:
        reference = Checkpoint.open(base, stack)
        others = {label: Checkpoint.open(path, stack) for label, path in names.items()}
        for other in others.values():
            reference.check_same_tensors(other)
        n_params, squares = _squares_by_part(reference, others, chunk_elements, progress)
    rows = tuple(
        GapRow(
            part,
            n_params[part],
            math.sqrt(squares[None][part]),
            {label: math.sqrt(squares[label][part]) for label in others},
        )
        for part in sorted(n_params, key=_part_order)
    )
    total = GapRow(
        "total",
        sum(n_params.values()),
        math.sqrt(math.fsum(squares[None].values())),
        {label: math.sqrt(math.fsum(squares[label].values())) for label in others},
    )
    gap = WeightGap(str(base), {label: str(path) for label, path in names.items()}, rows, total)
    if out is not None:
        write_json(with_invocation(gap.to_dict()), out, overwrite=overwrite)
    return gap


def _squares_by_part(
    reference: Checkpoint, others: dict[str, Checkpoint], chunk_elements: int, progress: bool
) -> tuple[dict[str, int], dict[str | None, dict[str, float]]]:
    """Parameters per part, and per part the float64 sums of squares of the base (key None)
    and of each tuned model's difference to it (key: its label)."""
    n_params: dict[str, int] = defaultdict(int)
    squares: dict[str | None, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    with Progress(
        reference.n_params, desc="weights", unit="param", scale=True, enabled=progress
    ) as bar:
        for name in reference.names:
            part = part_name(name)
            for start, stop in reference.chunks(name, chunk_elements):
                theta = reference.read(name, start, stop)  # [elements] float64
                squares[None][part] += float(torch.dot(theta, theta))
                for label, other in others.items():
                    delta = other.read(name, start, stop).sub_(theta)
                    squares[label][part] += float(torch.dot(delta, delta))
                n_params[part] += theta.numel()
                bar.update(theta.numel())
    return n_params, squares


def tuned_labels(
    tuned: Sequence[str | os.PathLike], labels: Sequence[str] | None
) -> dict[str, str | os.PathLike]:
    """The tuned checkpoints by label: each of `labels` in order, then each directory's name.

    >>> tuned_labels(["runs/rl", "runs/sft/model.safetensors"], None)
    {'rl': 'runs/rl', 'sft': 'runs/sft/model.safetensors'}
    >>> tuned_labels(["runs/a", "runs/b"], ["RL"])
    {'RL': 'runs/a', 'b': 'runs/b'}

    Raises:
        DivscopeError: no tuned model, more labels than tuned models, or a label twice.
    """
    given = list(labels or [])
    if not tuned:
        raise DivscopeError("weights: give at least one tuned model to compare with the base.")
    if len(given) > len(tuned):
        raise DivscopeError(
            f"--label given {len(given)} times but only {len(tuned)} tuned models; give one "
            "--label per tuned model, in order."
        )
    given += [_directory_name(Path(path)) for path in tuned[len(given) :]]
    twice = sorted({label for label in given if given.count(label) > 1})
    if twice:
        raise DivscopeError(
            f"two tuned models are labelled {twice[0]!r}; name each with --label, in order."
        )
    return dict(zip(given, tuned, strict=True))


def part_name(parameter: str) -> str:
    """The row a tensor counts in: its path up to the first numeric component (a numbered
    block), else its module (the name without the last component).

    >>> part_name("model.layers.12.mlp.experts.3.up_proj.weight")
    'model.layers.12'
    >>> part_name("model.embed_tokens.weight"), part_name("lm_head.weight")
    ('model.embed_tokens', 'lm_head')
    """
    block = _BLOCK.match(parameter)
    return block.group(1) if block else parameter.rsplit(".", 1)[0]


def _part_order(part: str) -> tuple[int, str, int]:
    """Embeddings, numbered blocks (numeric order), other modules (by name), output heads."""
    prefix, _, index = part.rpartition(".")
    if index.isdigit():
        return 1, prefix, int(index)
    if "embed" in part:
        return 0, part, 0
    return (3 if "head" in part else 2), part, 0


def _directory_name(path: Path) -> str:
    return path.parent.name if path.suffix in (".safetensors", ".json") else path.name


@dataclass(frozen=True)
class Checkpoint:
    """The tensors of one safetensors checkpoint (one file or an index of shards), opened
    lazily: `read` slices one tensor along its first dimension."""

    path: str
    """The checkpoint as given, for messages."""
    files: dict[str, Any]
    """Tensor name -> the open `safe_open` handle of the file that holds it."""

    @staticmethod
    def open(path: str | os.PathLike, stack: ExitStack) -> Checkpoint:
        """Open every file of the checkpoint at `path` (closed with `stack`).

        Raises:
            DivscopeError: no such path, no safetensors checkpoint there, a shard of the index
                that is missing, or a file that is not safetensors.
        """
        file = _checkpoint_file(Path(path))
        if file.name.endswith(".safetensors"):  # one file: its own header lists the tensors
            handle = _open(file, stack)
            return Checkpoint(str(path), dict.fromkeys(handle.keys(), handle))
        shards = _index_shards(file)
        handles = {shard: _open(shard, stack) for shard in sorted(set(shards.values()))}
        return Checkpoint(str(path), {name: handles[shard] for name, shard in shards.items()})

    @property
    def names(self) -> list[str]:
        """The tensor names, sorted."""
        return sorted(self.files)

    @property
    def n_params(self) -> int:
        """Elements of all tensors."""
        return sum(math.prod(self.shape(name)) for name in self.files)

    def shape(self, name: str) -> list[int]:
        """The shape of tensor `name`, from its file's header."""
        return self.files[name].get_slice(name).get_shape()

    def chunks(self, name: str, elements: int) -> Iterator[tuple[int, int]]:
        """Row ranges `[start, stop)` of tensor `name` along its first dimension, each of at
        most `elements` elements (at least one row); a 0-d tensor is one range (0, 1)."""
        shape = self.shape(name)
        if not shape:
            yield 0, 1
            return
        rows = max(1, elements // max(1, math.prod(shape[1:])))
        for start in range(0, shape[0], rows):
            yield start, min(start + rows, shape[0])

    def read(self, name: str, start: int, stop: int) -> torch.Tensor:
        """Rows `[start, stop)` of tensor `name` as a flat float64 tensor (a 0-d tensor whole)."""
        handle = self.files[name]
        if not self.shape(name):
            values = handle.get_tensor(name)
        else:
            values = handle.get_slice(name)[start:stop]
        return values.to(torch.float64).reshape(-1)

    def check_same_tensors(self, other: Checkpoint) -> None:
        """Raise unless `other` holds exactly this checkpoint's tensor names and shapes.

        Raises:
            DivscopeError: naming the first tensor only one of them holds (and how many more),
                or the first tensor whose shapes differ.
        """
        for one, two in ((self, other), (other, self)):
            missing = sorted(set(one.files) - set(two.files))
            if missing:
                more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
                raise DivscopeError(
                    f"tensor {missing[0]!r}{more} is in {one.path} but not in {two.path}: σ "
                    "compares checkpoints of one architecture; give a tuned twin of the base."
                )
        for name in self.names:
            mine, theirs = self.shape(name), other.shape(name)
            if mine != theirs:
                raise DivscopeError(
                    f"tensor {name!r} has shape {mine} in {self.path} but {theirs} in "
                    f"{other.path}: σ compares checkpoints of one architecture and size."
                )


def _checkpoint_file(path: Path) -> Path:
    """The `.safetensors` file or the `.safetensors.index.json` of the checkpoint at `path`.

    Raises:
        DivscopeError: no such path, or no safetensors checkpoint there.
    """
    if not path.exists():
        raise DivscopeError(
            f"{path}: no such file or directory; `weights` reads local safetensors checkpoints "
            "(download one with `hf download ID --include '*.safetensors*' --local-dir DIR`)."
        )
    if path.is_dir():
        found = [path / name for name in (INDEX_FILE, SINGLE_FILE) if (path / name).exists()]
        path = found[0] if found else path
    if not path.name.endswith((".safetensors", ".safetensors.index.json")):
        raise DivscopeError(
            f"{path}: no {SINGLE_FILE} or {INDEX_FILE}; `weights` reads safetensors only "
            "(re-save a .bin checkpoint with `model.save_pretrained(DIR)`)."
        )
    return path


def _index_shards(index: Path) -> dict[str, Path]:
    """Tensor name -> shard file, from a sharded checkpoint's index.

    Raises:
        DivscopeError: the index is not a JSON object with a `weight_map`, or names a shard
            that is missing.
    """
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        shards = {str(name): index.parent / file for name, file in weight_map.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise DivscopeError(
            f"{index}: not a safetensors index (a JSON object with a `weight_map`): {error!r}"
        ) from error
    for shard in shards.values():
        if not shard.exists():
            raise DivscopeError(
                f"{index} names the shard {shard.name}, which is not in {shard.parent}."
            )
    return shards


def _open(file: Path, stack: ExitStack):
    """A `safe_open` handle of `file` (torch tensors), closed with `stack`.

    Raises:
        DivscopeError: `file` is not a safetensors file.
    """
    try:
        return stack.enter_context(safe_open(str(file), framework="pt"))
    except SafetensorError as error:
        raise DivscopeError(f"{file}: not a readable safetensors file ({error}).") from error
