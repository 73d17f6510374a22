"""The one loader of every command's models: a `ModelPair` (and any other model a command
names) in, its checked tokenizers, its loaded models and their description out.

It loads in two steps, because a command checks its cheap inputs before any model loads and
may find nothing left to do (a resumed run): `open_pair` loads the tokenizers and checks that
their ordinary vocabularies agree (`vocab.check_tokenizers`); `Pair.load` loads the models
where the placement and the process's world put them. `Pair.describe` and `Pair.placement`
are the output metadata's `models` and `device`.

A command's models are the fields of its model group that `names` lists: `base` and `rl` of a
`ModelPair`, and for `cross-sample` also `rast_base` and `rast_rl` of its
`decoding.cross_sample.CrossSampleModels` (a `ModelPair` with the small pair of `rast`). Each
is read as a `divscope.models.names.ModelName` with its revision (`base_revision`,
`rl_revision`) and, for `rl`, the pair's `subfolder` (`model_names`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from divscope.distributed import World
from divscope.errors import DivscopeError
from divscope.models.names import ModelName
from divscope.params import ModelPair
from divscope.vocab import Compatibility


@dataclass(frozen=True)
class Pair:
    """The models of a run before they load: their paths and their checked tokenizers."""

    models: ModelPair
    """The model group the paths come from, with its placement."""
    paths: dict[str, ModelName]
    """Model name -> local directory or hub id with its revision, in the order they load; the
    first one's tokenizer is the run's."""
    tokenizers: dict[str, Any]
    """Each model's tokenizer, by name."""
    compatibility: Compatibility | None
    """What the tokenizers share; None for a single model."""
    world: World = field(default_factory=World)
    """The processes of the run: which device each model goes to (`World.device`)."""
    given: dict[str, Any] = field(default_factory=dict)
    """Model name -> the model given already loaded (the Python API), used as it is."""

    @property
    def tokenizer(self) -> Any:
        """The first model's tokenizer: it tokenizes the inputs and decodes the outputs."""
        return next(iter(self.tokenizers.values()))

    @property
    def vocab(self) -> int:
        """The ids every tokenizer holds: `compatibility.vocab`, or the one tokenizer's size."""
        return self.compatibility.vocab if self.compatibility else len(self.tokenizer)

    def load(self) -> dict[str, Any]:
        """The models, by name, in one dtype, on the devices of the placement and the world; a
        model given loaded as it is.

        Raises:
            DivscopeError: a model that cannot be loaded, or a bad device (naming its flag).
        """
        from divscope.models.loading import load_models

        placement, world = self.models.placement, self.world
        own = {"base": world.device(placement.base_device),
               "rl": world.device(placement.rl_device)}  # fmt: skip
        named = {name: path for name, path in self.paths.items() if name not in self.given}
        loaded = load_models(
            named, dtype=placement.dtype, device=world.device(placement.device),
            device_map=placement.device_map, devices=own,
        ) if named else {}  # fmt: skip
        return {n: self.given[n] if n in self.given else loaded[n] for n in self.paths}

    def describe(self, loaded: dict[str, Any]) -> dict[str, Any]:
        """The metadata's `models`: each loaded model's path, revision, commit and dtype."""
        from divscope.models.loading import describe_model

        return {name: describe_model(model, self.paths[name]) for name, model in loaded.items()}

    def placement(self) -> str:
        """The metadata's `device`: where the options put the models (`describe_placement`)."""
        from divscope.models.placement import describe_placement

        p = self.models.placement
        return describe_placement(
            p.device, p.device_map, {"base": p.base_device, "rl": p.rl_device}
        )


def open_pair(
    models: ModelPair, world: World | None = None, names: Sequence[str] = ("base", "rl")
) -> Pair:
    """The models `names` of `models` with their tokenizers loaded and checked.

    Args:
        models: the model group; each name is one of its fields (`base`, `rl`, ...): a local
            directory or hub id, or a model already loaded (`loading.given_model`).
        world: the processes of the run (`distributed.current_world`); None: this one alone.
        names: the models the run needs, in the order they load (the first one's tokenizer
            is the run's). With a single name no vocabulary is compared.

    Raises:
        DivscopeError: a named model left unset, or tokenizers whose ordinary vocabularies
            differ (unless `models.allow_tokenizer_mismatch`).
    """
    from divscope.models.loading import given_model
    from divscope.models.tokenizers import load_tokenizer
    from divscope.vocab import check_tokenizers

    paths = model_names(models, names)
    loaded = {name: given_model(getattr(models, name)) for name in names}
    tokenizers = {
        name: load_tokenizer(paths[name]) if pair is None else pair[1]
        for name, pair in loaded.items()
    }
    compatibility = (
        check_tokenizers(tokenizers, allow_mismatch=models.allow_tokenizer_mismatch)
        if len(tokenizers) > 1
        else None
    )
    given = {name: pair[0] for name, pair in loaded.items() if pair is not None}
    return Pair(models, paths, tokenizers, compatibility, world or World(), given)


def model_names(models: ModelPair, names: Sequence[str] = ("base", "rl")) -> dict[str, ModelName]:
    """The models `names` of `models`, each read with its revision option (`base_revision`,
    `rl_revision`) and, for `rl`, the pair's `subfolder` (`divscope.models.names.parse`); a
    model given loaded (`loading.given_model`) by its `name_or_path` (`loading.model_name`).

    >>> str(model_names(ModelPair("org/base", "org/run", rl_revision="step-4"))["rl"])
    'org/run@step-4'

    Raises:
        DivscopeError: a named model left unset; see `parse`.
    """
    missing = [name for name in names if getattr(models, name) is None]
    if missing:
        raise DivscopeError(f"no {missing[0]} model given; pass --{missing[0].replace('_', '-')}.")
    from divscope.models.loading import model_name

    return {
        name: model_name(
            getattr(models, name),
            revision=getattr(models, f"{name}_revision", None),
            subfolder=models.subfolder if name == "rl" else None,
            flag=f"--{name.replace('_', '-')}",
        )
        for name in names
    }


__all__ = ["Pair", "model_names", "open_pair"]
