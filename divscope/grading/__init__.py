"""Graders, grading of response tables, and accuracy estimators.

Graders are `(response, answer) -> bool | Verdict` functions looked up by name (`math`,
`exact`, `lab`, or `module:function`); `grade_table` runs one over many responses in worker
processes with a per-response time limit, and `divscope.grade` does so file to file.
The estimators (`pass_at_k`, `bootstrap_ci`, `Interval`) live in `divscope.estimators`.

>>> from divscope.grading import get_grader
>>> get_grader("lab")(" 9 + 3 = 12. So the answer is \\\\boxed{12}.", "12")
True
"""

from divscope._lazy import lazy_exports

# name -> module; loaded on first use, so that a grading worker process imports only its grader
# and the pool, not the analyses (scipy) or Math-Verify (sympy).
_EXPORTS: dict[str, str] = {
    "GradeConfig": "divscope.grading.table",
    "GradeReport": "divscope.grading.grade",
    "Grader": "divscope.grading.registry",
    "Outcome": "divscope.grading.pool",
    "TimeoutPool": "divscope.grading.pool",
    "Verdict": "divscope.grading.verdict",
    "final_answer": "divscope.answers",
    "get_grader": "divscope.grading.registry",
    "grade_table": "divscope.grading.table",
    "grader_target": "divscope.grading.registry",
    "known_graders": "divscope.grading.registry",
    "last_boxed": "divscope.answers",
    "mean_at_n": "divscope.grading.accuracy",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
