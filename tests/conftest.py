"""Session fixtures shared by the whole suite."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.tinymodels import save_pair

LAB = Path(__file__).parents[1] / "fixtures" / "lab"


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory) -> tuple[Path, Path]:
    """Paths of a saved tiny base/rl pair sharing a word-level tokenizer (vocab 44, head 48)."""
    return save_pair(tmp_path_factory.mktemp("tiny_pair"))


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for the module: tiny models decode ~10x faster on one thread than on a
    contended pool. Use with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def lab_tokens_path(tmp_path_factory) -> Path:
    """The token table of the committed lab's `trajectories.jsonl`, RL vs base, scored once per
    session (slow tests only: about 5 s on 2 cores)."""
    from divscope import score

    out = tmp_path_factory.mktemp("lab_tokens") / "tokens.parquet"
    score(LAB / "trajectories.jsonl", base=str(LAB / "base"), rl=str(LAB / "rl"), out=out,
          progress=False)  # fmt: skip
    return out
