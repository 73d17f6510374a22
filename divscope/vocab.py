"""What each token id stands for, byte for byte, and whether two or more tokenizers agree on it.

`token_bytes` gives the exact bytes of every id of a Hugging Face tokenizer (byte-level BPE,
SentencePiece-style or anything `decode` handles); `readable` writes such bytes for people
(UTF-8, with `<0xHH>` for each byte that is not part of a whole UTF-8 character).
`check_tokenizers` decides whether models can be compared token by token: their ordinary
vocabularies (the BPE/model vocabulary, added tokens left out) must map the same ids to the same
bytes; added or special tokens that differ are only warned about, and their ids are never
sampled (`Compatibility.suppressed`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from divscope.errors import DivscopeError, warn

# Differing tokens listed by name in a message; the rest are counted.
LISTED = 10

_SPACE_MARKER = "▁"  # SentencePiece's word-start marker (U+2581)
_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")  # bytes that `surrogateescape` could not decode


@cache
def _byte_level_to_latin1() -> dict[int, int]:
    """str.translate table from GPT-2's byte-level characters (`Ġ` for a space, `Ċ` for a
    newline, ...; transformers' `bytes_to_unicode`) to the Latin-1 character of their byte."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {ord(char): byte for byte, char in bytes_to_unicode().items()}


def readable(raw: bytes) -> str:
    """The text of a token for people: its UTF-8, each byte outside a whole character as `<0xHH>`.

    Args:
        raw: the token's bytes (see `token_bytes`).

    Returns:
        The decoded text; a token that holds part of a character (e.g. the first bytes of an
        emoji that the tokenizer splits) shows those bytes as `<0xHH>`.

    >>> readable(" Wait,".encode()), readable("é".encode()), readable("😀".encode()[:3])
    (' Wait,', 'é', '<0xF0><0x9F><0x98>')
    """
    text = raw.decode("utf-8", errors="surrogateescape")
    return _ESCAPED_BYTE.sub(lambda match: f"<0x{ord(match.group()) - 0xDC00:02X}>", text)


def token_bytes(tokenizer: Any) -> list[bytes]:
    """The exact bytes of every token id below `len(tokenizer)`.

    Byte-level BPE tokens (GPT-2, Llama 3, Qwen: the backend's decoder is `ByteLevel`) map their
    characters back to bytes; SentencePiece-style tokens turn `▁` into a space and `<0xHH>`
    byte-fallback tokens into that byte; any other tokenizer gives the UTF-8 of
    `tokenizer.decode([id])`. Added tokens are the UTF-8 of their content; ids that no token
    holds give `b""`.

    Args:
        tokenizer: a Hugging Face tokenizer.

    Returns:
        One `bytes` per id, `len(tokenizer)` of them. For a byte-level tokenizer the bytes of
        the tokens of any text join to that text's bytes.

    >>> from tokenizers import Tokenizer, models
    >>> from transformers import PreTrainedTokenizerFast
    >>> backend = Tokenizer(models.WordLevel({"a": 0, "b": 1}, unk_token="a"))
    >>> token_bytes(PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>"))
    [b'a', b'b', b'<eos>']
    """
    return [raw or b"" for raw in _vocabulary(tokenizer).tokens]


class TokenPieces:
    """Readable text of single tokens (`readable` of their exact bytes, `token_bytes`: no `Ġ`
    or `▁`, bytes of a split character as `<0xHH>`), cached per id across calls: the token
    table's `token` and the cross-sample results' switch tokens.

    >>> from tokenizers import Tokenizer, models
    >>> from transformers import PreTrainedTokenizerFast
    >>> backend = Tokenizer(models.WordLevel({"a": 0, "b": 1}, unk_token="a"))
    >>> TokenPieces(PreTrainedTokenizerFast(tokenizer_object=backend))([1, 0, 1])
    ['b', 'a', 'b']
    """

    def __init__(self, tokenizer: Any) -> None:
        self.raw = token_bytes(tokenizer)  # [len(tokenizer)]; about 0.3 s for 150k tokens
        self.cache: dict[int, str] = {}

    def __call__(self, token_ids: Any) -> list[str]:
        """The readable text of each id of `token_ids` (a sequence or a 1-d array of ids below
        `len(tokenizer)`)."""
        ids = token_ids.tolist() if hasattr(token_ids, "tolist") else list(token_ids)
        for i in set(ids) - self.cache.keys():
            self.cache[i] = readable(self.raw[i])
        return [self.cache[i] for i in ids]


@dataclass(frozen=True)
class TokenDifference:
    """One id on which the tokenizers disagree: its readable token on each side."""

    token_id: int
    tokens: tuple[str | None, ...]
    """The token of each tokenizer, in the order of `Compatibility.names`; None: no token."""

    def sides(self, names: Sequence[str]) -> str:
        """`'a' for base but 'b' for rl` (more names: `'a' for base, 'b' for rl, ...`), with
        `undefined` where a tokenizer has no token there.

        >>> TokenDifference(7, ("a", None)).sides(["base", "rl"])
        "'a' for base but undefined for rl"
        """
        sides = [
            f"{'undefined' if token is None else repr(token)} for {name}"
            for token, name in zip(self.tokens, names, strict=True)
        ]
        return " but ".join(sides) if len(sides) == 2 else ", ".join(sides)


@dataclass(frozen=True)
class Compatibility:
    """How far a set of tokenizers agree: what `check_tokenizers` found."""

    names: tuple[str, ...]
    """The tokenizers' names, in the order given."""
    sizes: tuple[int, ...]
    """`len(tokenizer)` of each."""
    vocab: int
    """Ids shared by all: the smallest size. Logits of higher ids are dropped."""
    suppressed: tuple[int, ...]
    """Ids below `vocab` whose added/special token differs: decoding never emits them."""
    special: tuple[TokenDifference, ...] = field(repr=False)
    """Added/special tokens that differ, beyond-`vocab` ids defined on one side included."""
    ordinary: tuple[TokenDifference, ...] = field(repr=False)
    """Ordinary tokens that differ; non-empty only when the mismatch was allowed."""

    def metadata(self) -> dict[str, Any]:
        """A JSON-able summary for a table's metadata (differing tokens: the first `LISTED`)."""
        return {
            "names": list(self.names),
            "sizes": list(self.sizes),
            "vocab": self.vocab,
            "suppressed": list(self.suppressed),
            "differing_special": [_as_json(d, self.names) for d in self.special[:LISTED]],
            "n_differing_special": len(self.special),
            "differing_ordinary": [_as_json(d, self.names) for d in self.ordinary[:LISTED]],
            "n_differing_ordinary": len(self.ordinary),
        }


def check_tokenizers(
    tokenizers: Mapping[str, Any], *, allow_mismatch: bool = False
) -> Compatibility:
    """Check that models with these tokenizers can be compared token by token.

    The ordinary vocabularies must agree: every id that is an ordinary token of two tokenizers
    has the same bytes in both, and no id is an ordinary token of one and undefined in another.
    Added/special tokens may differ (e.g. a reserved special token renamed by a fine-tune):
    that gives one warning listing them, and their ids go into `suppressed`. Ids at or beyond
    the smallest size are not shared; those defined by some tokenizers are listed too.

    Args:
        tokenizers: the tokenizers by name (e.g. `{"base": ..., "rl": ...}`); names appear in
            the messages.
        allow_mismatch: warn instead of refusing when ordinary tokens differ.

    Returns:
        The `Compatibility` of the tokenizers.

    Raises:
        DivscopeError: ordinary tokens differ (the message names the first such id) and
            `allow_mismatch` is False, or fewer than two tokenizers are given.

    >>> from tokenizers import Tokenizer, models
    >>> from transformers import PreTrainedTokenizerFast
    >>> def word_level(words):
    ...     backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, "a"))
    ...     return PreTrainedTokenizerFast(tokenizer_object=backend)
    >>> check_tokenizers({"base": word_level("abc"), "rl": word_level("abc")}).suppressed
    ()
    >>> check_tokenizers({"base": word_level("abc"), "rl": word_level("abd")})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: the base and rl tokenizers differ in their ordinary \
vocabulary: token id 2 is 'c' for base but 'd' for rl (1 id differs). ...
    """
    names = tuple(tokenizers)
    if len(names) < 2:
        raise DivscopeError(
            f"check_tokenizers needs at least two tokenizers to compare, got {list(names)}."
        )
    vocabularies = [_vocabulary(tokenizer) for tokenizer in tokenizers.values()]
    sizes = tuple(len(v.tokens) for v in vocabularies)
    shared = min(sizes)
    special: list[TokenDifference] = []
    ordinary: list[TokenDifference] = []
    padded = [v.tokens + [None] * (max(sizes) - len(v.tokens)) for v in vocabularies]
    for token_id, tokens in enumerate(zip(*padded, strict=True)):
        if tokens.count(tokens[0]) == len(tokens):
            continue
        difference = TokenDifference(
            token_id, tuple(None if raw is None else readable(raw) for raw in tokens)
        )
        kinds = [v.kind(token_id) for v in vocabularies]
        if token_id < shared and _ordinary_conflict(kinds, tokens):
            ordinary.append(difference)
        else:
            special.append(difference)
    together = _together(names)
    if ordinary:
        first = f"token id {ordinary[0].token_id} is {ordinary[0].sides(names)}"
        count = f"{len(ordinary)} id{' differs' if len(ordinary) == 1 else 's differ'}"
        if not allow_mismatch:
            raise DivscopeError(
                f"{together} differ in their ordinary vocabulary: {first} ({count}). divscope "
                "compares distributions over one shared vocabulary; use models that share a "
                "tokenizer, or pass --allow-tokenizer-mismatch (allow_tokenizer_mismatch=True in "
                "Python) to compare them anyway."
            )
        warn(
            f"{together} differ in their ordinary vocabulary ({count}; first: {first}); "
            "comparing them anyway as asked. At those ids the models' probabilities belong to "
            "different strings, so their divergences compare different tokens, and text is "
            f"tokenized and decoded with the {names[0]} tokenizer."
        )
    suppressed = tuple(d.token_id for d in special if d.token_id < shared)
    if special:
        listed = "; ".join(f"id {d.token_id}: {d.sides(names)}" for d in special[:LISTED])
        more = f"; and {len(special) - LISTED} more" if len(special) > LISTED else ""
        never = ", and decoding never emits the differing ones among them" if suppressed else ""
        warn(
            f"{together} differ in {len(special)} added/special token"
            f"{'' if len(special) == 1 else 's'}: {listed}{more}. The ordinary tokens agree: the "
            f"models are compared over the {shared} ids that all tokenizers hold{never}."
        )
    return Compatibility(
        names=names,
        sizes=sizes,
        vocab=shared,
        suppressed=suppressed,
        special=tuple(special),
        ordinary=tuple(ordinary),
    )


# ---------------------------------------------------------------- internals

_ORDINARY, _ADDED = "ordinary", "added"


@dataclass(frozen=True)
class _Vocabulary:
    """A tokenizer's bytes per id (None: no token holds the id) and its added tokens' ids."""

    tokens: list[bytes | None]
    added: frozenset[int]

    def kind(self, token_id: int) -> str | None:
        """`added`, `ordinary`, or None where the tokenizer has no such token."""
        if token_id in self.added:
            return _ADDED
        if token_id < len(self.tokens) and self.tokens[token_id] is not None:
            return _ORDINARY
        return None


def _vocabulary(tokenizer: Any) -> _Vocabulary:
    size = len(tokenizer)
    tokens: list[bytes | None] = [None] * size
    backend = getattr(tokenizer, "backend_tokenizer", None)
    added = {i: token.content for i, token in tokenizer.added_tokens_decoder.items() if i < size}
    if backend is not None:
        model_vocab = backend.get_vocab(with_added_tokens=False)
    else:
        model_vocab = tokenizer.get_vocab()
    model_vocab = {t: i for t, i in model_vocab.items() if 0 <= i < size and i not in added}
    style = _style(backend)
    if style == "byte-level":
        for token, i in model_vocab.items():
            tokens[i] = _byte_level_bytes(token)
    elif style == "sentencepiece":
        for token, i in model_vocab.items():
            tokens[i] = _sentencepiece_bytes(token)
    else:
        ids = sorted(model_vocab.values())
        for i, text in zip(ids, tokenizer.batch_decode([[i] for i in ids]), strict=True):
            tokens[i] = text.encode()
    for i, content in added.items():
        tokens[i] = content.encode()
    return _Vocabulary(tokens=tokens, added=frozenset(added))


def _style(backend: Any) -> str:
    """`byte-level`, `sentencepiece` or `decode`, from the types in the backend's decoder."""
    decoder = None if backend is None else backend.decoder
    if decoder is None:
        return "decode"
    state = json.loads(decoder.__getstate__())
    types = set(_decoder_types(state))
    if "ByteLevel" in types:
        return "byte-level"
    replaces_marker = _SPACE_MARKER in json.dumps(state, ensure_ascii=False)
    if types & {"Metaspace", "ByteFallback"} or ("Replace" in types and replaces_marker):
        return "sentencepiece"
    return "decode"


def _decoder_types(state: Any):
    """Every `type` in a decoder's JSON state, nested `Sequence` decoders included."""
    if isinstance(state, dict):
        if "type" in state:
            yield state["type"]
        for value in state.values():
            yield from _decoder_types(value)
    elif isinstance(state, list):
        for value in state:
            yield from _decoder_types(value)


def _byte_level_bytes(token: str) -> bytes:
    latin1 = token.translate(_byte_level_to_latin1())
    try:
        return latin1.encode("latin-1")
    except UnicodeEncodeError:  # a character outside the byte-level alphabet: keep its UTF-8
        return b"".join(
            char.encode("latin-1") if ord(char) < 256 else char.encode() for char in latin1
        )


def _sentencepiece_bytes(token: str) -> bytes:
    match = _BYTE_FALLBACK.fullmatch(token)
    if match:
        return bytes([int(match.group(1), 16)])
    return token.replace(_SPACE_MARKER, " ").encode()


def _ordinary_conflict(kinds: Sequence[str | None], tokens: Sequence[bytes | None]) -> bool:
    """Whether an id's tokens show different ordinary vocabularies: two ordinary tokens with
    different bytes, or an ordinary token where another tokenizer has none."""
    ordinary = {raw for kind, raw in zip(kinds, tokens, strict=True) if kind == _ORDINARY}
    return len(ordinary) > 1 or (bool(ordinary) and None in kinds)


def _together(names: Sequence[str]) -> str:
    """`the base and rl tokenizers`, `the base, rl and rast_base tokenizers`."""
    listed = f"{', '.join(names[:-1])} and {names[-1]}"
    return f"the {listed} tokenizers"


def _as_json(difference: TokenDifference, names: Sequence[str]) -> dict[str, Any]:
    return {"id": difference.token_id, **dict(zip(names, difference.tokens, strict=True))}
