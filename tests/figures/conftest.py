"""Fixtures of the figure tests: Agg backend, small seeded synthetic inputs."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import polars as pl  # noqa: E402
import pytest  # noqa: E402

from divscope.testing import synthetic_results, synthetic_tokens  # noqa: E402


@pytest.fixture(scope="session")
def tokens() -> pl.DataFrame:
    return synthetic_tokens()


@pytest.fixture(scope="session")
def results() -> pl.DataFrame:
    return synthetic_results()


@pytest.fixture(scope="session")
def checkpoints() -> dict[int, pl.DataFrame]:
    return {step: synthetic_tokens(scale=step / 100) for step in (20, 40, 60, 80, 100)}
