"""Fixtures of the decoder's tests."""

from __future__ import annotations

import pytest

from tests.decoding.helpers import twin


@pytest.fixture(scope="session")
def twin_pair():
    """The Llama `twin` pair."""
    return twin()
