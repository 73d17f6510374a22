"""Does divergence predict a wrong answer? ROC curves against the entropy baseline."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from divscope import analyses
from divscope.analyses._frames import Frame
from divscope.estimators import Interval
from divscope.figures.style import (
    BASE_COLOR,
    GREY,
    RL_COLOR,
    SQUARE_HEIGHT,
    corner_note,
    figure_function,
    metric_symbol,
    panels,
)


@figure_function
def failure_roc(
    tokens: Frame,
    ax: Axes | None = None,
    *,
    metric: str = "js",
    top_n: int = 100,
    n_boot: int = 1000,
    seed: int = 0,
) -> Figure:
    """ROC of each response's top-n mean divergence for flagging wrong answers, beside entropy.

    Both predictors score a response by the mean of its `top_n` largest values (of the
    divergence, or of the base model's entropy); the legend gives each AUROC with its
    problem-level bootstrap interval.

    Args:
        tokens: a token table with `correct` filled in for both outcomes.
        ax: axes to draw into (default: a new single-column figure).
        metric: the divergence column.
        top_n: values averaged per response.
        n_boot: bootstrap resamples of prompts for the intervals.
        seed: seed of the bootstrap.

    >>> import numpy as np
    >>> import polars as pl
    >>> rng = np.random.default_rng(0)
    >>> tokens = pl.DataFrame({"prompt_id": np.repeat([f"p{i}" for i in range(20)], 10),
    ...     "sample_id": 0, "js": rng.exponential(0.05, 200),
    ...     "entropy_base": rng.exponential(1.0, 200),
    ...     "correct": np.repeat(rng.random(20) < 0.5, 10)})  # one response per prompt
    >>> failure_roc(tokens, n_boot=50).axes[0].get_ylabel()
    'true-positive rate (wrong flagged)'
    """
    curves = analyses.failure_roc(tokens, metric, top_n=top_n)
    result = analyses.failure_auroc(tokens, metric, top_n=top_n, n_boot=n_boot, seed=seed)
    figure, (axes,) = panels(ax, height=SQUARE_HEIGHT)
    axes.plot([0, 1], [0, 1], color=GREY, linestyle=":", linewidth=0.8, label="chance (0.5)")
    predictors = (
        (metric, f"top-{top_n} mean {metric_symbol(metric)}", result.divergence, RL_COLOR),
        ("entropy_base", f"top-{top_n} mean base entropy", result.entropy, BASE_COLOR),
    )
    for predictor, name, interval, color in predictors:
        curve = curves.filter(predictor=predictor)
        axes.plot(
            curve["false_positive_rate"],
            curve["true_positive_rate"],
            color=color,
            label=f"{name}\nAUROC {_interval(interval)}",
        )
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.01)
    axes.set_aspect("equal")
    axes.set_xlabel("false-positive rate (correct flagged)")
    axes.set_ylabel("true-positive rate (wrong flagged)")
    axes.legend(loc="lower right")
    corner_note(
        axes,
        f"{result.n_failures} wrong of {result.n_responses} responses\n"
        f"{result.n_prompts} prompts; {int(result.divergence.confidence * 100)}% CI",
        loc="upper left",
    )
    return figure


def _interval(interval: Interval) -> str:
    return f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"
