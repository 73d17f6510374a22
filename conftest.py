"""Session fixtures of the tests (tests/) and of the package's `>>>` examples (divscope/,
collected by `--doctest-modules`): one torch thread, and the lab's scored token tables.

The examples that need a token table read `lab_tokens`, a name pytest puts in their namespace: the
path (a string) of the token table of the first 8 of the lab's 512 trajectories (731 tokens),
scored with `divscope.score` on the lab's base and RL models, once per session. Outside pytest,
make it as `divscope.score`'s own example does (divscope/scoring/score.py).

A GPU run (`pytest -m gpu`) collects on a lean GPU image, which has only what `score`,
`generate` and `cross-sample` need (docs/gpu.md): it collects no `>>>` examples (none is a GPU
test, and `--doctest-modules` would import every module of divscope, the analyses' too), and
where a package is missing (polars, scipy, ...), it leaves out the test files and folders whose
imports need it, naming them at the end.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem

ROOT = Path(__file__).parent
LAB = ROOT / "fixtures" / "lab"
_LEFT_OUT: list[str] = []
"""The test files and folders a GPU run left out, each with the import it lacks."""


def _gpu_run(config) -> bool:
    """Whether the run selects the `gpu` tests (`-m gpu`, `-m "gpu and not slow"`, ...)."""
    return re.search(r"(?<!not )\bgpu\b", config.getoption("markexpr") or "") is not None


def _missing_import(path: Path) -> str | None:
    """The module that importing `path` (a test module; a folder's conftest.py: its own
    top-level imports) needs and that is not installed here, or None."""
    if path.name != "conftest.py":
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            return error.name
        except Exception:
            return None  # pytest reports it when it collects the file
        return None
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as error:  # not installed here
                return error.name or name
    return None


def pytest_ignore_collect(collection_path: Path, config):
    if not _gpu_run(config):
        return None
    if collection_path.is_relative_to(ROOT / "divscope"):
        return True  # the examples: no GPU test among them
    source = collection_path / "conftest.py" if collection_path.is_dir() else collection_path
    if source.suffix != ".py" or not source.is_file():
        return None
    missing = _missing_import(source)
    if missing is None:
        return None
    _LEFT_OUT.append(f"{collection_path.relative_to(ROOT)} (needs {missing})")
    return True


def pytest_terminal_summary(terminalreporter):
    if _LEFT_OUT:
        terminalreporter.write_line(
            "not collected, their imports are not installed here: " + ", ".join(_LEFT_OUT)
        )


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
    lines = (LAB / "trajectories.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / "head.jsonl").write_text("".join(lines[:8]), encoding="utf-8")
    return _score_lab(folder / "tokens.parquet", folder / "head.jsonl")


@pytest.fixture(autouse=True)
def _lab_tokens_in_examples(request, doctest_namespace):
    """Put `lab_tokens` in the namespace of the `>>>` examples that read it (and score the lab
    only when one does)."""
    if isinstance(request.node, DoctestItem) and any(
        "lab_tokens" in example.source for example in request.node.dtest.examples
    ):
        doctest_namespace["lab_tokens"] = str(request.getfixturevalue("lab_head_tokens_path"))
