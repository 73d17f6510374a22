"""The `>>>` examples in the generation docstrings run and hold."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["divscope.generation"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
