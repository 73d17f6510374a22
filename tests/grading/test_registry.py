import pytest

from divscope.errors import DivscopeError
from divscope.grading import get_grader, known_graders


def test_lab_grader_is_registered():
    grader = get_grader("lab")
    assert grader("plan: forward ; 9 +3 = 12 ; answer: 12", "12")
    assert not grader("plan: backward ; 9 -3 = 6 ; answer: 6", "12")
    assert "lab" in known_graders()


def test_unknown_grader_lists_the_known_ones():
    with pytest.raises(DivscopeError, match="unknown grader 'nope'.*lab"):
        get_grader("nope")
