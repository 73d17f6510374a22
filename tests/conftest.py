"""Session fixtures shared by the whole suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tinymodels import save_pair


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory) -> tuple[Path, Path]:
    """Paths of a saved tiny base/rl pair sharing a word-level tokenizer (vocab 44, head 48)."""
    return save_pair(tmp_path_factory.mktemp("tiny_pair"))
