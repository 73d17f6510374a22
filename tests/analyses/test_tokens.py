"""normalized_token, planning_enrichment, word_frequencies, token_profile, most_frequent_words."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import (
    PLANNING_WORDS,
    most_frequent_words,
    normalized_token,
    planning_enrichment,
    token_profile,
    word_frequencies,
)


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
