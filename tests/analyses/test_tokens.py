"""normalized_token, planning_enrichment and its lexicon (read_planning_words, --planning-words),
word_frequencies, token_profile, most_frequent_words."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import (
    PAPER_PLANNING_SHARE,
    PLANNING_WORDS,
    Metrics,
    most_frequent_words,
    normalized_token,
    planning_enrichment,
    read_planning_words,
    summary,
    token_profile,
    word_frequencies,
)
from divscope.errors import DivscopeError


@pytest.mark.parametrize(
    "raw,normalized",
    [(" Wait", "wait"), ("Ġlet", "let"), ("▁So", "so"), ("\n", ""), ("  x ", "x"), ("ĠĠA", "a")],
)
def test_normalized_token(raw, normalized):
    assert pl.DataFrame({"token": [raw]}).select(normalized_token())["token"][0] == normalized


def test_default_lexicon_holds_the_issue_words():
    issue = "wait alternatively let first check verify hmm but maybe instead however try consider"
    assert set((issue + " suppose recall").split()) <= PLANNING_WORDS


def test_planning_enrichment_hand_computed():
    frame = pl.DataFrame(
        {
            "token": [" Wait", " the", " so", " x", " cat", "Ġbut", " a", " b"],
            "js": [0.9, 0.8, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        }
    )
    result = planning_enrichment(frame, top_share=0.25)  # the top 2: " Wait", " the"
    assert (result.n_top, result.share_top, result.share_all) == (2, 0.5, 3 / 8)
    assert result.enrichment == pytest.approx(4 / 3)


def test_planning_enrichment_with_a_custom_lexicon():
    frame = pl.DataFrame({"token": [" Cat", " dog"], "js": [0.9, 0.0]})
    result = planning_enrichment(frame, top_share=0.5, lexicon=["CAT "])
    assert (result.share_top, result.share_all, result.enrichment) == (1.0, 0.5, 2.0)


# Ten tokens ranked by js; the default lexicon holds "wait", "so", "but", "check".
PLANNING_TABLE = pl.DataFrame(
    {
        "token": [" Wait", " seven", " so", " the", " check", "Ġbut", " carry", " x", " y", " z"],
        "js": [0.9, 0.8, 0.7, 0.6, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    }
)


def test_the_global_planning_share_is_planning_tokens_among_all_tokens():
    result = planning_enrichment(PLANNING_TABLE, top_share=0.2)  # the top 2: " Wait", " seven"
    # Planning tokens: " Wait", " so", " check", "Ġbut": 4 of 10; in the top 2: " Wait".
    assert (result.share_all, result.share_top, result.enrichment) == (0.4, 0.5, 1.25)
    assert result.n_words == len(PLANNING_WORDS) == 32
    assert result.paper_share_all == PAPER_PLANNING_SHARE == 0.019


def test_a_planning_word_file_replaces_the_lexicon(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("Seven\n\n  carry \nĠx\n", encoding="utf-8")
    assert read_planning_words(words) == {"seven", "carry", "x"}
    result = planning_enrichment(PLANNING_TABLE, top_share=0.2, lexicon=read_planning_words(words))
    # " seven", " carry", " x": 3 of 10; in the top 2 (" Wait", " seven"): " seven".
    assert (result.share_all, result.share_top, result.n_words) == (0.3, 0.5, 3)
    assert result.enrichment == pytest.approx(0.5 / 0.3)


@pytest.mark.parametrize(
    "text,message",
    [
        (None, r"--planning-words '.*missing.txt': cannot read it .*one planning word per line"),
        ("\n  \n", r"--planning-words '.*words.txt': no word in it"),
        ("wait\nlet us\n", r"words.txt', line 2: 'let us' holds several words"),
    ],
)
def test_a_bad_planning_word_file_is_refused_with_its_name(tmp_path, text, message):
    path = tmp_path / ("missing.txt" if text is None else "words.txt")
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(DivscopeError, match=message):
        read_planning_words(path)
    with pytest.raises(DivscopeError, match=message):  # before the table is read
        summary(pl.DataFrame(), Metrics(planning_words=path))


def test_word_frequencies_hand_computed():
    frame = pl.DataFrame(
        {
            "token": [" Wait", "wait", " so", " the", " the", " a", "\n", " mid"],
            "js": [0.5, 0.3, 0.2, 0.0, 0.001, 0.0, 0.0, 0.05],
        }
    )
    assert word_frequencies(frame).rows() == [
        ("high", "wait", 2, pytest.approx(2 / 3)),
        ("high", "so", 1, pytest.approx(1 / 3)),
        ("low", "the", 2, pytest.approx(2 / 3)),  # "\n" normalizes to "" and is left out
        ("low", "a", 1, pytest.approx(1 / 3)),
    ]
    assert word_frequencies(frame, top=1)["word"].to_list() == ["wait", "the"]


def test_token_profile_matches_normalized_occurrences():
    frame = pl.DataFrame(
        {"token": [" the", "The", "the", " cat", "theme"], "js": [0.0, 0.4, 0.2, 0.9, 0.7]}
    )
    result = token_profile(frame, " THE", thresholds=(0.1,), percentiles=(50,))
    assert (result.n_tokens, result.share_below, result.percentiles) == (
        3,
        {0.1: 1 / 3},
        {50.0: 0.2},
    )


def test_most_frequent_words_normalizes_and_skips_whitespace():
    frame = pl.DataFrame({"token": ["\n", "\n", "\n", " b", "B", " a", " a", " c"]})
    assert most_frequent_words(frame, top=2) == ["a", "b"]
    assert most_frequent_words(frame.head(3)) == []
