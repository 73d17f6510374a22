"""Settings of cross-sample results: selectors, their text form, descriptions and matching."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import Settings, parse_difference, parse_setting
from divscope.errors import DivscopeError


@pytest.mark.parametrize(
    "text,expected",
    [
        ("policy=rl", {"policy": "rl"}),
        (" policy = rl-replace , force_prefix=Alright ",
         {"policy": "rl-replace", "force_prefix": "Alright"}),
        ('policy=base,force_prefix="Okay, so"', {"policy": "base", "force_prefix": "Okay, so"}),
        ("policy=base,force_prefix='a - b'", {"policy": "base", "force_prefix": "a - b"}),
        ("eps=none", {"eps": "none"}),
    ],
)  # fmt: skip
def test_parse_setting(text, expected):
    assert parse_setting(text) == expected


@pytest.mark.parametrize(
    "text,message",
    [("policy", "is not column=value"), ("=rl", "is not column=value"),
     ("policy=a,policy=b", "given twice")],
)  # fmt: skip
def test_parse_setting_rejects(text, message):
    with pytest.raises(DivscopeError, match=message):
        parse_setting(text)


def test_parse_difference_splits_outside_quotes():
    first, second = parse_difference("policy=x,force_prefix='so - then' - policy=base")
    assert first == {"policy": "x", "force_prefix": "so - then"}
    assert second == {"policy": "base"}
    with pytest.raises(DivscopeError, match="two settings separated by ' - '"):
        parse_difference("policy=x")


def frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "prompt_id": ["a"] * 5,
            "policy": ["base", "base", "forward", "forward", "rl"],
            "budget": [-1, -1, 2, -1, -1],
            "eps": [None, None, 0.05, 0.05, None],
            "temperature": [1.0, 0.6, 1.0, 1.0, 1.0],
            "seed": [0] * 5,
            "correct": [True] * 5,
        }
    )


def test_select_converts_text_to_the_column_type():
    settings = Settings(frame(), what="demo")
    chosen = settings.select("policy=forward,budget=2")
    assert (chosen["eps"], chosen["budget"]) == (0.05, 2)
    assert settings.select({"policy": "base", "temperature": 0.6}).sampling == {"temperature": 0.6}
    assert settings.select("policy=base,temperature=0.6").describe() == (
        "policy=base, budget=-1 (temperature=0.6, seed=0)"
    )


def test_controls_keep_only_their_sampling():
    data = frame().with_columns(budget=pl.lit(8), eps=pl.lit(0.1))
    settings = Settings(data, what="demo")
    base = settings.select("policy=base,temperature=1")
    assert (base["budget"], base["eps"]) == (-1, None)
    assert settings.select("policy=forward")["budget"] == 8


def test_matched_returns_none_for_an_absent_control():
    settings = Settings(frame().filter(pl.col("policy") != "rl"), what="demo")
    assert settings.matched("rl", settings.select("policy=forward,budget=2")) is None
    rows = settings.matched("base", settings.select("policy=forward,budget=2"))
    assert rows["temperature"].to_list() == [1.0]


def test_early_responses_with_a_share_are_one_setting():
    data = pl.DataFrame(
        {
            "prompt_id": ["a", "b", "a"],
            "policy": ["early"] * 3,
            "budget": [3, 5, 4],
            "share": [0.1, 0.1, None],
            "correct": [True, False, True],
        }
    )
    cells = Settings(data, what="demo").cells()
    assert [(s["budget"], s["share"]) for s in cells] == [(-1, 0.1), (4, None)]
