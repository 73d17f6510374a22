import pytest

from divscope.grading import final_answer, last_boxed


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"so \boxed{12}", "12"),
        (r"\boxed{1} then \boxed{2}", "2"),  # the last box counts
        (r"\boxed{\frac{\sqrt{2}}{2}}", r"\frac{\sqrt{2}}{2}"),  # nested braces
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),  # escaped braces are content
        (r"\boxed {7}", "7"),
        (r"\fbox{7}", "7"),
        (r"\boxed{3} and a truncated \boxed{\frac{1}{", "3"),  # the last complete box
        ("the answer is **7**", None),
        ("", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [(r"x \boxed{ a  b }", "a b"), ("  plain\n answer ", "plain answer"), ("", "")],
)
def test_final_answer(text, expected):
    assert final_answer(text) == expected
