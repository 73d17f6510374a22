"""The `>>>` examples in the grading docstrings run and hold."""

import doctest
import importlib

import pytest

MODULES = ["accuracy", "answer", "exact_grader", "math_grader", "pool", "registry", "table"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"divscope.grading.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
