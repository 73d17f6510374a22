"""The `>>>` examples in the lab's docstrings run and hold."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["divscope.lab", "divscope.lab.task", "divscope.lab.grpo"])
def test_docstring_examples(name):
    result = doctest.testmod(
        importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE
    )
    assert result.attempted > 0 and result.failed == 0
