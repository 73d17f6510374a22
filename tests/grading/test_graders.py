"""Table-driven cases of the built-in graders (called directly, in this process)."""

import pytest

from divscope.grading import Verdict, get_grader

MATH = [
    # (response, gold, correct, note)
    (r"\boxed{\frac{1}{2}}", "0.5", True, None),
    (r"\boxed{0.5}", r"\frac{1}{2}", True, None),
    (r"\boxed{\dfrac{1}{2}}", "1/2", True, None),
    (r"\boxed{\tfrac12}", r"$\frac{1}{2}$", True, None),
    (r"\boxed{ \frac { 1 } { 2 } }", "0.5", True, None),  # spaces
    (r"\boxed{30^\circ}", "30", True, None),
    (r"\boxed{30}", r"30^\circ", True, None),
    (r"\boxed{5 \text{ cm}}", "5", True, None),  # units text
    (r"\boxed{5\,\mathrm{cm}}", "5", True, None),
    (r"\boxed{\textbf{5}}", "5", True, None),  # bold inside the box
    (r"\boxed{\mathbf{5}}", "5", True, None),
    (r"\boxed{1{,}000}", "1000", True, None),
    (r"\boxed{1+x^{2}}", "x^2+1", True, None),
    (r"\boxed{\sqrt{\frac{1}{4}}}", "0.5", True, None),  # nested braces
    (r"\boxed{2^{1/2}}", r"\sqrt{2}", True, None),
    (r"First \boxed{3}, no wait: \boxed{4}", "4", True, None),  # the last box counts
    (r"First \boxed{4}, no wait: \boxed{3}", "4", False, None),
    (r"\boxed{4}", r"\boxed{4}", True, None),  # a boxed gold answer
    (r"\boxed{5}", "6", False, None),
    ("The answer is **5**.", "5", False, "no \\boxed{} in the response"),  # bold, no box
    ("The answer is 5", "5", False, "no \\boxed{} in the response"),  # plain, no box
    ("", "5", False, "no \\boxed{} in the response"),
    (r"\boxed{5", "5", False, "no \\boxed{} in the response"),  # truncated box
]


@pytest.mark.parametrize("response, gold, correct, note", MATH)
def test_math(response, gold, correct, note):
    assert get_grader("math")(response, gold) == Verdict(correct, note)


EXACT = [
    (r"\boxed{B}", "B", True),
    (r"\boxed{ B }", " B", True),
    (r"\boxed{A} \boxed{B}", "B", True),
    (r"\boxed{b}", "B", False),  # case matters
    ("B", "B", True),  # no box: the whole response
    ("the answer is B", "B", False),
    (r"\boxed{0.5}", r"\frac{1}{2}", False),  # no maths
]


@pytest.mark.parametrize("response, gold, correct", EXACT)
def test_exact(response, gold, correct):
    assert get_grader("exact")(response, gold) == Verdict(correct)


def test_lab_grader_still_a_plain_bool():
    assert get_grader("lab")("So the answer is \\boxed{12}.", "12") is True
