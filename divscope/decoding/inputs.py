"""What a decoding run loads (`cross-sample`, `calibrate`): the models of its pair
(`models.pair`), the prompts' token ids, the stop ids and a forced opening."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from divscope.errors import DivscopeError
from divscope.models.pair import Pair
from divscope.params import Chat
from divscope.vocab import Compatibility


@dataclass(frozen=True)
class Loaded:
    """The models of a decoding run, their shared vocabulary and the prompts' token ids."""

    pair: Pair
    """The models' paths, tokenizers and placement (`models.pair.open_pair`)."""
    prompt_ids: list[list[int]]
    """Each prompt's token ids (`prompts.prompt_token_ids`: chat prompts templated)."""
    models: dict[str, Any]
    """The loaded models by name, in one dtype."""
    stop: list[int]
    """Every id that ends a response (`models.tokenizers.stop_ids`)."""
    prefix_ids: tuple[int, ...] = ()
    """The ids of the forced opening (`force_prefix`); empty when none."""

    @property
    def tokenizer(self) -> Any:
        """The first model's tokenizer: it tokenizes the prompts and decodes the responses."""
        return self.pair.tokenizer

    @property
    def compatibility(self) -> Compatibility | None:
        """What the tokenizers share (None: one model): the `suppressed` ids are never emitted."""
        return self.pair.compatibility

    @property
    def vocab(self) -> int:
        """The ids every model's tokenizer holds."""
        return self.pair.vocab

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
    frame: Any,
    source: str,
    pair: Pair,
    *,
    stop: Sequence[str] = (),
    chat: Chat = Chat(),  # noqa: B008 (frozen, hashable)
    force_prefix: str | None = None,
) -> Loaded:
    """Load what a decoding run needs; the prompts and the forced prefix are checked before
    any model loads (the tokenizers are, by `open_pair`).

    Args:
        frame: prompts as `prompts.read_prompts_arrow` returns them (or a polars frame).
        source: the prompts file, for error messages.
        pair: the run's models, their tokenizers checked; the first one's tokenizer is used.
        stop: extra stop tokens (`--stop`: ids or single-token strings).
        chat: the chat template and system prompt, applied with the first tokenizer.
        force_prefix: a forced opening, tokenized with the first tokenizer without special
            tokens into `Loaded.prefix_ids`.

    Raises:
        DivscopeError: a prompt that the tokenizer cannot hold, a forced prefix that tokenizes
            to no token or holds a stop token or an id outside the shared vocabulary, a model
            that cannot be loaded, or a bad `--stop`.
    """
    from divscope.models.tokenizers import stop_ids
    from divscope.prompts import prompt_token_ids

    tokenizer, vocab = pair.tokenizer, pair.vocab
    prompt_ids = prompt_token_ids(frame, tokenizer, source=source, chat=chat)
    prefix_ids: tuple[int, ...] = ()
    if force_prefix is not None:
        prefix_ids = tuple(tokenizer.encode(force_prefix, add_special_tokens=False))
        if not prefix_ids:
            raise DivscopeError(
                f"--force-prefix {force_prefix!r} tokenizes to no token; give text that the "
                "base tokenizer turns into at least one token."
            )
    models = pair.load()
    stop_list = stop_ids(pair.tokenizers, models, stop, vocab=vocab)
    bad = [i for i in prefix_ids if i in stop_list or i >= vocab]
    if bad:
        raise DivscopeError(
            f"--force-prefix {force_prefix!r} tokenizes to {list(prefix_ids)}, which holds "
            f"id {bad[0]}, a stop token or an id outside the shared vocabulary of {vocab}; "
            "a forced opening cannot end the response."
        )
    return Loaded(pair, prompt_ids, models, stop_list, prefix_ids)


def note_length_cap(
    keys: list[str], prompt_ids: list[list[int]], max_new_tokens, models, *, enabled: bool
) -> None:
    """Print once, on stderr, how the default length cap was capped by a model's context."""
    from divscope.models.lengths import context_length, length_note
    from divscope.progress import note

    prompts = list(zip(keys, prompt_ids, strict=True))
    contexts = {name: context_length(model) for name, model in models.items()}
    note(length_note(prompts, max_new_tokens, contexts), enabled=enabled)
