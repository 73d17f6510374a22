"""Model names: a local directory, or a Hub id with a revision and a subfolder.

Wherever divscope names a model (`--base`, `--rl`, generate's `--model`, cross-sample's small
pair, the monitor's base) the name is a local directory or `ID[/SUBFOLDER][@REVISION]`:

    Qwen/Qwen2.5-Math-7B                       the Hub id, its main branch
    my-org/grpo-run@step-400                   the branch (or tag, or commit) step-400
    my-org/grpo-run/checkpoints/step-400       the folder checkpoints/step-400 of the repository
    my-org/grpo-run/step-400@3f1c2e...          that folder at one commit

An existing local path is always a directory, even with an `@` in its name. `parse` reads a
name (with the `--base-revision`, `--rl-revision` and `--subfolder` options, which must agree
with it), and `ModelName.options` is what `from_pretrained` takes, for the model, its config
and its tokenizer alike.

>>> parse("my-org/grpo-run/step-400@main")
ModelName(id='my-org/grpo-run', revision='main', subfolder='step-400')
>>> str(parse("my-org/grpo-run", revision="step-400"))
'my-org/grpo-run@step-400'
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from divscope.errors import DivscopeError

_SNAPSHOT = re.compile(r"snapshots/([0-9a-f]{40})(?:/|$)")
"""A Hub cache's snapshot folder, named by its commit hash."""


@dataclass(frozen=True)
class ModelName:
    """A model as divscope loads it: a local directory or Hub id, a revision, a subfolder.

    >>> ModelName("my-org/grpo-run", "step-400").options()
    {'revision': 'step-400'}
    """

    id: str
    """A local directory or a Hub id (`org/name`)."""
    revision: str | None = None
    """A Hub branch, tag or commit; None: the main branch (or the local directory as it is)."""
    subfolder: str | None = None
    """The folder of the repository (or directory) that holds the model; None: its root."""

    def __str__(self) -> str:
        folder = f"/{self.subfolder}" if self.subfolder else ""
        return f"{self.id}{folder}" + (f"@{self.revision}" if self.revision else "")

    @classmethod
    def of(cls, name: str | os.PathLike | ModelName) -> ModelName:
        """`name` as this class: as it is, or read by `parse`."""
        return name if isinstance(name, cls) else parse(name)

    def options(self) -> dict[str, str]:
        """The keyword arguments of `from_pretrained` (model, config, tokenizer) it sets."""
        given = {"revision": self.revision, "subfolder": self.subfolder}
        return {key: value for key, value in given.items() if value}

    def commit_hash(self) -> str | None:
        """The commit the files come from, where the Hub cache tells it: a local directory
        inside a cache's `snapshots/<hash>` folder, or a Hub id whose `config.json` at this
        revision is in the cache (`huggingface_hub.try_to_load_from_cache`, no network).
        None for other local directories, and for files the cache does not hold.

        >>> ModelName("/hub/models--o--m/snapshots/" + "a" * 40).commit_hash() == "a" * 40
        True
        """
        found = _SNAPSHOT.search(Path(self.id).as_posix() + "/")
        if found or Path(self.id).exists():
            return found.group(1) if found else None
        from huggingface_hub import try_to_load_from_cache

        config = f"{self.subfolder}/config.json" if self.subfolder else "config.json"
        try:
            cached = try_to_load_from_cache(self.id, config, revision=self.revision)
        except ValueError:  # not a valid repository id
            return None
        found = _SNAPSHOT.search(Path(cached).as_posix()) if isinstance(cached, str) else None
        return found.group(1) if found else None

    def describe(self) -> dict[str, Any]:
        """Its provenance for an output's metadata: the id, the revision requested, the
        subfolder, and the commit hash (`commit_hash`)."""
        return {
            "name_or_path": self.id,
            "revision": self.revision,
            "subfolder": self.subfolder,
            "commit_hash": self.commit_hash(),
        }


def parse(
    name: str | os.PathLike,
    *,
    revision: str | None = None,
    subfolder: str | None = None,
    flag: str = "--rl",
) -> ModelName:
    """Read a model name: an existing local directory as it is, else
    `ID[/SUBFOLDER][@REVISION]` (a Hub id is `org/name`, so what follows it is a folder).

    Args:
        name: as given on the command line or to the library.
        revision: the revision option (`--rl-revision`); it must agree with an `@REVISION`.
        subfolder: the subfolder option (`--subfolder`); it must agree with the name's.
        flag: the option that gave `name`, for the messages (`--base`, `--rl`, `--model`).

    Raises:
        DivscopeError: a revision given twice with two values, an empty revision, a revision
            of a local directory, or a verl FSDP checkpoint (`check_not_sharded`).

    >>> parse("gpt2@v1"), parse("org/name@refs/pr/3").revision
    (ModelName(id='gpt2', revision='v1', subfolder=None), 'refs/pr/3')
    >>> parse("org/name@a", revision="b")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: --rl org/name@a names revision 'a', --rl-revision 'b'; ...
    """
    text = os.fspath(name)
    if Path(text).exists():  # a local directory wins, `@` and all
        check_not_sharded(Path(text, subfolder or ""), flag)
        if revision:
            raise DivscopeError(
                f"{flag}-revision {revision}: {flag} {text} is a local directory, which has no "
                "revisions; give the Hub id (revisions are Hub branches, tags or commits), or "
                "the local directory of that revision."
            )
        return ModelName(text, None, subfolder or None)
    head, at, named_revision = text.partition("@")
    if at and not named_revision:
        raise DivscopeError(f"{flag} {text}: an empty revision after '@'; give ID@REVISION.")
    parts = head.split("/")
    named_folder = None
    if len(parts) > 2 and not head.startswith((".", "/", "~")) and all(parts):
        head, named_folder = "/".join(parts[:2]), "/".join(parts[2:])
    return ModelName(
        head,
        _agreed(f"{flag} {text}", named_revision or None, revision, f"{flag}-revision"),
        _agreed(f"{flag} {text}", named_folder, subfolder or None, "--subfolder"),
    )


def _agreed(given: str, named: str | None, option: str | None, option_flag: str) -> str | None:
    """The one value that the name (`given`) and its option (`option_flag`) give."""
    what = "revision" if option_flag.endswith("-revision") else "subfolder"
    if named and option and named != option:
        raise DivscopeError(
            f"{given} names {what} {named!r}, {option_flag} {option!r}; give the {what} once."
        )
    return named or option


def check_not_sharded(path: Path, flag: str = "--rl") -> None:
    """Refuse a verl FSDP checkpoint (`global_step_N/` or its `actor/`, holding
    `model_world_size_W_rank_R.pt` shards): transformers cannot load it; the message gives
    the command that merges it into a Hugging Face directory (verl's `model_merger`; the legacy
    script for checkpoints of older verl releases, without `fsdp_config.json`).

    Raises:
        DivscopeError: naming the checkpoint, with the merge command.
    """
    actor = next(
        (d for d in (path, path / "actor") if d.is_dir() and any(d.glob("model_world_size_*.pt"))),
        None,
    )
    if actor is None:
        return
    target = actor.parent / "merged_hf_model"
    legacy = not (actor / "fsdp_config.json").exists()  # saved before verl's model_merger
    script = "scripts/legacy_model_merger.py" if legacy else "-m verl.model_merger"
    command = (
        f"python {script} merge --backend fsdp --local_dir {shlex.quote(str(actor))} "
        f"--target_dir {shlex.quote(str(target))}"
    )
    ready = actor / "huggingface"
    whole = ready.is_dir() and any(ready.glob("*.safetensors"))
    alternative = f" (or pass {flag} {ready}, which holds the whole weights)" if whole else ""
    raise DivscopeError(
        f"{flag} {path}: a verl FSDP checkpoint (its weights sharded in "
        f"model_world_size_*_rank_*.pt files), not a Hugging Face model directory. Merge it "
        f"with verl first{' (in a clone of verl: no fsdp_config.json)' if legacy else ''}:"
        f"\n    {command}\nthen pass {flag} {shlex.quote(str(target))}"
        f"{alternative}."
    )


__all__ = ["ModelName", "check_not_sharded", "parse"]
