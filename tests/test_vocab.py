import json
import warnings

import pytest

from divscope.errors import DivscopeError, DivscopeWarning
from divscope.vocab import LISTED, check_tokenizers, readable, token_bytes
from tests.qwen import ENDOFTEXT_ID, IM_START_ID, QWEN_LEN, SAMPLE_TEXTS
from tests.tinymodels import WORDS, make_tokenizer

NAMES = ("base", "rl", "rast_base", "rast_rl")


def _with_added(tokenizer, *contents: str):
    tokenizer.add_tokens(list(contents), special_tokens=True)
    return tokenizer


def _gapped(vocab: dict[str, int]):
    """A word-level tokenizer of exactly `vocab`, whose ids may leave gaps (`len` counts tokens,
    so a gap moves the last tokens beyond it)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel(vocab, unk_token=next(iter(vocab))))
    return PreTrainedTokenizerFast(tokenizer_object=backend)


def _sentencepiece_tokenizer():
    """A Llama-2-style tokenizer: `▁` marks word starts, unknown characters fall back to
    `<0xHH>` byte tokens."""
    from tokenizers import Tokenizer, decoders, models, normalizers
    from transformers import PreTrainedTokenizerFast

    pieces = ["<unk>", *(f"<0x{b:02X}>" for b in range(256)), "▁", "W", "a", "i", "t"]
    pieces += ["▁W", "ai", "▁Wai", "▁Wait"]
    merges = [("▁", "W"), ("a", "i"), ("▁W", "ai"), ("▁Wai", "t")]
    backend = Tokenizer(
        models.BPE(
            {p: i for i, p in enumerate(pieces)}, merges, unk_token="<unk>", byte_fallback=True
        )  # fmt: skip
    )
    backend.normalizer = normalizers.Sequence(
        [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
    )
    backend.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]  # fmt: skip
    )
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")


# ---------------------------------------------------------------- token_bytes and readable


def test_word_level_tokens_are_their_decoded_text():
    assert token_bytes(make_tokenizer()) == [
        b"<pad>", b"<bos>", b"<eos>", b"<unk>", *(w.encode() for w in WORDS)
    ]  # fmt: skip


def test_byte_level_tokens_join_to_the_text_exactly(qwen_tokenizer):
    raw = token_bytes(qwen_tokenizer)
    assert len(raw) == QWEN_LEN == len(qwen_tokenizer)
    assert raw[IM_START_ID] == b"<|im_start|>" and raw[ENDOFTEXT_ID] == b"<|endoftext|>"
    assert raw[qwen_tokenizer.convert_tokens_to_ids("ĠWait")] == b" Wait"
    for text in (*SAMPLE_TEXTS, "".join(SAMPLE_TEXTS)):
        ids = qwen_tokenizer.encode(text)
        assert b"".join(raw[i] for i in ids) == text.encode(), text


def test_readable_tokens_of_real_text(qwen_tokenizer):
    raw = token_bytes(qwen_tokenizer)

    def pieces(text):
        return [readable(raw[i]) for i in qwen_tokenizer.encode(text)]

    assert pieces(" Wait, Let me") == [" Wait", ",", " Let", " me"]
    assert "".join(pieces("Café déjà vu")) == "Café déjà vu"
    assert "".join(pieces("中文数学题：求解方程。")) == "中文数学题：求解方程。"
    assert "".join(pieces("\\frac{1}{2} \\boxed{42}")) == "\\frac{1}{2} \\boxed{42}"
    # 🦩 (F0 9F A6 A9) is split in three tokens: each shows its bytes, never mojibake.
    assert pieces(" 🦩") == [" <0xF0><0x9F>", "<0xA6>", "<0xA9>"]
    shown = "".join(piece for text in SAMPLE_TEXTS for piece in pieces(text))
    assert "Ġ" not in shown and "Ċ" not in shown and "\ufffd" not in shown


@pytest.mark.parametrize(
    "raw,expected",
    [
        (b"plain", "plain"),
        ("é".encode(), "é"),
        ("é".encode()[:1], "<0xC3>"),
        (b"\xff a", "<0xFF> a"),
        ("😀".encode()[1:], "<0x9F><0x98><0x80>"),
        (b"", ""),
    ],
)
def test_readable(raw, expected):
    assert readable(raw) == expected


def test_sentencepiece_tokens_map_the_space_marker_and_byte_fallback():
    tokenizer = _sentencepiece_tokenizer()
    raw = token_bytes(tokenizer)
    assert raw[tokenizer.convert_tokens_to_ids("▁Wait")] == b" Wait"
    assert raw[tokenizer.convert_tokens_to_ids("<0x0A>")] == b"\n"
    ids = tokenizer.encode("Wait é")
    assert b"".join(raw[i] for i in ids) == " Wait é".encode()  # the prefix space is a token's
    assert [readable(raw[i]) for i in ids] == [" Wait", " ", "<0xC3>", "<0xA9>"]


def test_ids_without_a_token_are_empty():
    holes = _gapped({"<unk>": 0, "a": 1, "c": 3, "d": 4})
    assert len(holes) == 4
    assert token_bytes(holes) == [b"<unk>", b"a", b"", b"c"]


# ---------------------------------------------------------------- check_tokenizers


def test_identical_tokenizers_are_accepted_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compatibility = check_tokenizers({"base": make_tokenizer(), "rl": make_tokenizer()})
    assert compatibility.vocab == 44 and compatibility.sizes == (44, 44)
    assert compatibility.suppressed == () and compatibility.special == ()


def test_renamed_special_token_warns_once_and_is_suppressed():
    tokenizers = {
        "base": _with_added(make_tokenizer(), "<|reserved_0|>", "<|same|>"),
        "rl": _with_added(make_tokenizer(), "<|User|>", "<|same|>"),
    }
    with pytest.warns(DivscopeWarning) as caught:
        compatibility = check_tokenizers(tokenizers)
    assert len(caught) == 1
    assert str(caught[0].message).startswith(
        "the base and rl tokenizers differ in 1 added/special token: id 44: "
        "'<|reserved_0|>' for base but '<|User|>' for rl."
    )
    assert compatibility.vocab == 46 and compatibility.suppressed == (44,)


def test_an_added_token_on_one_side_only():
    with pytest.warns(DivscopeWarning, match="id 44: undefined for base but '<think>' for rl"):
        beyond = check_tokenizers(
            {"base": make_tokenizer(), "rl": _with_added(make_tokenizer(), "<think>")}
        )
    assert beyond.vocab == 44 and beyond.sizes == (44, 45)
    assert beyond.suppressed == ()  # id 44 is not shared: nothing to suppress
    with pytest.warns(DivscopeWarning, match="id 45: '<a>' for base but undefined for rl"):
        inside = check_tokenizers(
            {
                "base": _with_added(make_tokenizer(), "<s>", "<a>", "<b>"),
                "rl": _with_added(make_tokenizer(), "<s>"),
            }
        )
    assert inside.vocab == 45 and inside.suppressed == ()
    assert [d.token_id for d in inside.special] == [45, 46]


def test_differing_ordinary_tokens_are_refused_naming_the_first():
    words = list(WORDS)
    words[7], words[9] = "other", "more"
    with pytest.raises(DivscopeError) as error:
        check_tokenizers({"base": make_tokenizer(), "rl": make_tokenizer(words)})
    message = str(error.value)
    assert "token id 11 is 'w7' for base but 'other' for rl (2 ids differ)" in message
    assert "share a tokenizer" in message and "--allow-tokenizer-mismatch" in message
    # An ordinary token where the other tokenizer has none is a difference too.
    complete = _gapped({"<unk>": 0, "a": 1, "b": 2, "c": 3})
    gapped = _gapped({"<unk>": 0, "a": 1, "c": 3, "d": 4})
    with pytest.raises(DivscopeError, match="token id 2 is 'b' for base but undefined for rl"):
        check_tokenizers({"base": complete, "rl": gapped})


def test_allow_mismatch_warns_about_the_risk_instead():
    words = ["x0", *WORDS[1:]]
    with pytest.warns(DivscopeWarning) as caught:
        compatibility = check_tokenizers(
            {"base": make_tokenizer(), "rl": make_tokenizer(words)}, allow_mismatch=True
        )
    (message,) = [str(w.message) for w in caught]
    assert "token id 4 is 'w0' for base but 'x0' for rl" in message
    assert "different strings" in message and "decoded with the base tokenizer" in message
    assert compatibility.suppressed == () and compatibility.vocab == 44
    assert [d.token_id for d in compatibility.ordinary] == [4]


def test_many_differences_are_listed_up_to_a_limit():
    base = _with_added(make_tokenizer(), *(f"<a{i}>" for i in range(LISTED + 3)))
    rl = _with_added(make_tokenizer(), *(f"<b{i}>" for i in range(LISTED + 3)))
    with pytest.warns(DivscopeWarning) as caught:
        compatibility = check_tokenizers({"base": base, "rl": rl})
    (message,) = [str(w.message) for w in caught]
    assert f"differ in {LISTED + 3} added/special tokens" in message
    assert f"<a{LISTED - 1}>" in message and f"<a{LISTED}>" not in message
    assert "; and 3 more." in message
    assert len(compatibility.suppressed) == LISTED + 3
    metadata = compatibility.metadata()
    assert json.loads(json.dumps(metadata)) == metadata
    assert metadata["n_differing_special"] == LISTED + 3
    assert metadata["differing_special"][0] == {"id": 44, "base": "<a0>", "rl": "<b0>"}


def test_any_number_of_named_tokenizers():
    tokenizers = {
        "base": make_tokenizer(),
        "rl": make_tokenizer(),
        "rast_base": _with_added(make_tokenizer(), "<r>"),
        "rast_rl": make_tokenizer(),
    }
    with pytest.warns(DivscopeWarning, match="the base, rl, rast_base and rast_rl tokenizers"):
        compatibility = check_tokenizers(tokenizers)
    assert compatibility.names == NAMES and compatibility.vocab == 44
    words = ["x0", *WORDS[1:]]
    tokenizers["rast_rl"] = make_tokenizer(words)
    with pytest.raises(DivscopeError, match="'w0' for rast_base, 'x0' for rast_rl"):
        check_tokenizers(tokenizers)


def test_a_single_tokenizer_is_a_clear_error():
    with pytest.raises(DivscopeError, match="at least two tokenizers"):
        check_tokenizers({"base": make_tokenizer()})


def test_real_bpe_tokenizers_that_swap_two_ordinary_tokens_are_refused(
    qwen_tokenizer, qwen_swapped_rl
):
    from divscope.models.tokenizers import load_tokenizer

    swapped = load_tokenizer(str(qwen_swapped_rl))
    with pytest.raises(DivscopeError, match="token id 1000 is 'atus' for base but 'Th' for rl"):
        check_tokenizers({"base": qwen_tokenizer, "rl": swapped})


def test_tokenizers_without_a_tokenizers_backend_fall_back_to_decode():
    from transformers import ByT5Tokenizer

    tokenizer = ByT5Tokenizer()  # transformers' pure-Python backend: one token per byte
    assert not hasattr(tokenizer, "backend_tokenizer")
    raw = token_bytes(tokenizer)
    assert len(raw) == len(tokenizer)
    assert raw[:3] == [b"<pad>", b"</s>", b"<unk>"]
    assert b"".join(raw[i] for i in tokenizer.encode("Wait, 1/2", add_special_tokens=False)) == (
        b"Wait, 1/2"
    )
