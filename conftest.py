"""Session fixtures of the tests (tests/) and of the package's `>>>` examples (divscope/,
collected by `--doctest-modules`): one torch thread, and the lab's scored token tables.

The examples that need a token table read `lab_tokens`, a name pytest puts in their namespace: the
path (a string) of the token table of the first 8 of the lab's 512 trajectories (731 tokens),
scored with `divscope.score` on the lab's base and RL models, once per session. Outside pytest,
make it as `divscope.score`'s own example does (divscope/scoring/score.py).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from _pytest.doctest import DoctestItem

LAB = Path(__file__).parent / "fixtures" / "lab"


def _score_lab(out: Path, trajectories: Path = LAB / "trajectories.jsonl") -> Path:
    from divscope import score
    from divscope.params import ModelPair

    score(trajectories, ModelPair(str(LAB / "base"), str(LAB / "rl")), out, progress=False)
    return out


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """One torch CPU thread for the whole session: the tests' tiny models run ~10x faster on one
    thread than on a pool contended by other processes, and no test then depends on the count."""
    from divscope.models.threads import torch_threads

    with torch_threads(1):
        yield


@pytest.fixture(scope="session")
def lab_tokens_path(tmp_path_factory) -> Path:
    """The token table of the committed lab's `trajectories.jsonl`, RL vs base, scored once per
    session (slow tests only: about 5 s on 2 cores). Its `source` is the file's `model`: `base`
    for samples 0-3 of each prompt, `rl` for samples 4-7."""
    return _score_lab(tmp_path_factory.mktemp("lab_tokens") / "tokens.parquet")


@pytest.fixture(scope="session")
def lab_head_tokens_path(tmp_path_factory) -> Path:
    """The token table of the lab's first 8 trajectories (731 tokens), scored once per session:
    the examples' `lab_tokens`."""
    folder = tmp_path_factory.mktemp("lab_head_tokens")
    pl.read_ndjson(LAB / "trajectories.jsonl").head(8).write_ndjson(folder / "head.jsonl")
    return _score_lab(folder / "tokens.parquet", folder / "head.jsonl")


@pytest.fixture(autouse=True)
def _lab_tokens_in_examples(request, doctest_namespace):
    """Put `lab_tokens` in the namespace of the `>>>` examples that read it (and score the lab
    only when one does)."""
    if isinstance(request.node, DoctestItem) and any(
        "lab_tokens" in example.source for example in request.node.dtest.examples
    ):
        doctest_namespace["lab_tokens"] = str(request.getfixturevalue("lab_head_tokens_path"))
