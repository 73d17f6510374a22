import pytest

from divscope.errors import DivscopeError
from divscope.grading import get_grader, known_graders


def test_lab_grader_is_registered():
    grader = get_grader("lab")
    assert grader("So the answer is \\boxed{12}.", "12")
    assert not grader("So the answer is 12.", "12")
    assert "lab" in known_graders()


def test_unknown_grader_lists_the_known_ones():
    with pytest.raises(DivscopeError, match="unknown grader 'nope'.*lab"):
        get_grader("nope")


def test_builtin_and_user_graders():
    assert known_graders() == ["exact", "lab", "math"]
    assert get_grader("operator:eq")("5", "5")


@pytest.mark.parametrize(
    "name, message",
    [
        ("nope.mod:f", "cannot import module 'nope.mod'"),
        ("operator:nope", "module 'operator' has no 'nope'"),
        ("math:pi", "'pi' is not callable"),
        (":f", "name a function as module:function"),
    ],
)
def test_bad_user_graders(name, message):
    with pytest.raises(DivscopeError, match=message):
        get_grader(name)
