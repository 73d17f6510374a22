"""The lab's base and RL models and a small probe (4 of its eval prompts), shared by the
monitor's tests."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

LAB = Path(__file__).parents[2] / "fixtures" / "lab"
PROBE_PROMPTS = 4
MAX_NEW_TOKENS = 48


@pytest.fixture(scope="session")
def probe_prompts(tmp_path_factory) -> Path:
    """A probe file: the first 4 of the lab's eval prompts."""
    path = tmp_path_factory.mktemp("probe") / "probe.jsonl"
    pl.read_ndjson(LAB / "prompts" / "eval.jsonl").head(PROBE_PROMPTS).write_ndjson(path)
    return path


@pytest.fixture(scope="session")
def lab_rl():
    from divscope.models.loading import load_model

    return load_model(str(LAB / "rl"), device="cpu")


@pytest.fixture(scope="session")
def scorer(probe_prompts):
    from divscope.monitor import ProbeConfig, ProbeScorer

    config = ProbeConfig(max_new_tokens=MAX_NEW_TOKENS)
    return ProbeScorer(str(LAB / "base"), probe_prompts, config, device="cpu")
