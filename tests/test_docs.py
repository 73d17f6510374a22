"""Docs that stay true: cited contract sections exist, and the modules that teach by example keep
their examples. Pytest runs every `>>>` example of the package (`--doctest-modules` over
`divscope`, see pyproject.toml)."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# `docs/contracts.md, "Cross-sample results"`; the name may wrap across lines of a docstring.
CITATION = re.compile(r'docs/contracts\.md, "([^"]+)"')

MODULES_WITH_EXAMPLES = [
    *(f"divscope.analyses.{name}" for name in (
        "alignment", "controls", "coverage", "cross_sample_report", "cross_sampling",
        "distribution", "evolution", "failure", "flips", "position", "sampling", "shift",
        "stats", "summary", "switches", "tokens",
    )),
    "divscope.generation",
    *(f"divscope.grading.{name}" for name in (
        "accuracy", "answer", "exact_grader", "math_grader", "pool", "registry", "table",
    )),
    "divscope.lab", "divscope.lab.task", "divscope.lab.grpo", "divscope._lazy", "divscope.models",
]  # fmt: skip


def test_cited_contract_sections_exist():
    headings = re.findall(r"^## (.+)$", (ROOT / "docs/contracts.md").read_text(), re.M)
    citations = [
        (path.relative_to(ROOT), " ".join(name.split()))
        for folder in ("divscope", "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name in CITATION.findall(path.read_text(encoding="utf-8"))
    ]
    assert len(citations) >= 8  # the citations this test was written for are found
    missing = [(p, n) for p, n in citations if not any(h.startswith(n) for h in headings)]
    assert not missing, f"no such section in docs/contracts.md: {missing}"


@pytest.mark.parametrize("name", MODULES_WITH_EXAMPLES)
def test_module_keeps_runnable_examples(name):
    tests = doctest.DocTestFinder().find(importlib.import_module(name))
    runnable = [
        example
        for test in tests
        for example in test.examples
        if not example.options.get(doctest.SKIP)
    ]
    assert runnable, f"{name} has no runnable `>>>` example left"
