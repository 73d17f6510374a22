"""Which divergent tokens carry the gain: cross-sampling and takeover curves (Figs. 7, 8)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from divscope import analyses
from divscope.analyses._frames import Frame
from divscope.errors import DivscopeError
from divscope.figures.style import (
    BASE_COLOR,
    BLACK,
    DOUBLE_COLUMN,
    GREEN,
    GREY,
    ORANGE,
    PURPLE,
    RL_COLOR,
    SINGLE_COLUMN,
    SKY_BLUE,
    figure_function,
    legend_below,
    panel_title,
    panels,
    percent_axis,
)

DEFAULT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("forward: base samples, RL intervenes", ("forward", "random")),
    ("reverse: RL samples, base intervenes", ("reverse",)),
)
"""Panels of `cross_sampling_curves`: title and the policies drawn in it."""
POLICY_COLORS = {
    "forward": GREEN,
    "reverse": PURPLE,
    "random": GREY,
    "rl-replace": ORANGE,
    "gated": SKY_BLUE,
}
UNLIMITED = -1
BANDS = "shaded: 95% problem-bootstrap intervals"


def _budget_label(budget: int) -> str:
    return "∞" if budget == UNLIMITED else str(budget)


def _reference_lines(axes: Axes, curve: pl.DataFrame, policy: str, name: str, color: str) -> None:
    """A control's accuracy as a horizontal line over its confidence band."""
    rows = curve.filter(pl.col("policy") == policy)
    if rows.is_empty():
        return
    row = rows.row(0, named=True)
    axes.axhspan(row["accuracy_low"], row["accuracy_high"], color=color, alpha=0.1, linewidth=0)
    axes.axhline(
        row["accuracy"],
        color=color,
        linestyle="--",
        linewidth=1.0,
        label=f"{name} ({row['accuracy']:.0%})",
    )


@figure_function
def cross_sampling_curves(
    results: Frame,
    ax: Sequence[Axes] | None = None,
    *,
    groups: Sequence[tuple[str, Sequence[str]]] = DEFAULT_GROUPS,
    base_policy: str = "base",
    rl_policy: str = "rl",
    n_boot: int = 1000,
    seed: int = 0,
) -> Figure:
    """Accuracy against the intervention budget, forward and reverse side by side (Figs. 7, 8).

    Each policy is a line with its problem-level bootstrap band; the base and RL controls are
    dashed lines over their bands; the random-position baseline is grey. Budgets are evenly
    spaced, with "∞" for an unlimited budget. Panels without any of their policies are left out.

    Args:
        results: cross-sample results (DESIGN contract) with the controls.
        ax: one axes per drawn panel (default: a new figure).
        groups: (title, policies) per panel.
        base_policy: the base-model control.
        rl_policy: the RL-model control.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.

    Raises:
        DivscopeError: none of the groups' policies is in the results.
    """
    pooled = analyses.pooled_controls(results, (base_policy, rl_policy))
    curve = analyses.cross_sampling_curve(
        pooled, base_policy=base_policy, rl_policy=rl_policy, n_boot=n_boot, seed=seed
    )
    present = set(curve["policy"])
    drawn = [(title, [p for p in policies if p in present]) for title, policies in groups]
    drawn = [(title, policies) for title, policies in drawn if policies]
    if not drawn:
        wanted = sorted({p for _, policies in groups for p in policies})
        raise DivscopeError(
            f"cross_sampling_curves: none of the policies {', '.join(wanted)} is in the results "
            f"(present: {', '.join(sorted(present))})."
        )
    width = DOUBLE_COLUMN if len(drawn) > 1 else SINGLE_COLUMN
    figure, axes = panels(ax, len(drawn), width=width, height=2.6, sharey=True)
    for letter, panel, (title, policies) in zip("abcdef", axes, drawn, strict=False):
        cells = curve.filter(pl.col("policy").is_in(policies))
        budgets = sorted(set(cells["budget"]), key=lambda b: (b == UNLIMITED, b))
        where = {b: i for i, b in enumerate(budgets)}
        _reference_lines(panel, curve, base_policy, "base model", BASE_COLOR)
        _reference_lines(panel, curve, rl_policy, "RL model", RL_COLOR)
        for policy in policies:
            rows = cells.filter(pl.col("policy") == policy).sort(
                pl.col("budget").replace(UNLIMITED, np.iinfo(np.int32).max)
            )
            x = [where[b] for b in rows["budget"]]
            color = POLICY_COLORS.get(policy, BLACK)
            style = ":" if policy == "random" else "-"
            panel.fill_between(
                x, rows["accuracy_low"], rows["accuracy_high"], color=color, alpha=0.2, linewidth=0
            )
            panel.plot(x, rows["accuracy"], marker="o", color=color, linestyle=style, label=policy)
        panel.set_xticks(range(len(budgets)), [_budget_label(b) for b in budgets])
        panel.set_xlabel("intervention budget (max. switched tokens)")
        panel_title(panel, letter, title)
        panel.grid(True, axis="y")
        percent_axis(panel.yaxis, decimals=0)
    axes[0].set_ylabel("accuracy (mean@n, %)")
    handles = {}
    for panel in axes:
        for handle, label in zip(*panel.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    figure.legend(
        handles.values(),
        handles.keys(),
        loc="outside lower center",
        ncols=min(len(handles), 5),
        title=BANDS,
    )
    return figure


@figure_function
def takeover_knee(
    results: Frame,
    ax: Axes | None = None,
    *,
    policy: str = "gated",
    base_policy: str = "base",
    rl_policy: str = "rl",
    n_boot: int = 1000,
    seed: int = 0,
) -> Figure:
    """Accuracy against the share of taken-over tokens, the knee marked (the takeover paper).

    Each point is one setting of the takeover policy (its budget or threshold); the star marks
    the Kneedle knee, past which taking over more tokens adds little accuracy.

    Args:
        results: cross-sample results with the takeover policy and the controls.
        ax: axes to draw into (default: a new single-column figure).
        policy: the takeover policy.
        base_policy: the base-model control.
        rl_policy: the RL-model control.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
    """
    knee = analyses.takeover_knee(
        results, policy, base_policy=base_policy, rl_policy=rl_policy, n_boot=n_boot, seed=seed
    )
    curve = knee.curve
    figure, (axes,) = panels(ax, height=2.9)
    for accuracy, name, color in (
        (knee.base_accuracy, "base model", BASE_COLOR),
        (knee.rl_accuracy, "RL model", RL_COLOR),
    ):
        if accuracy is not None:
            axes.axhline(
                accuracy,
                color=color,
                linestyle="--",
                linewidth=1.0,
                label=f"{name} ({accuracy:.0%})",
            )
    share = curve["switch_share"].to_numpy()
    color = POLICY_COLORS.get(policy, BLACK)
    axes.fill_between(
        share, curve["accuracy_low"], curve["accuracy_high"], color=color, alpha=0.2, linewidth=0
    )
    axes.plot(share, curve["accuracy"], marker="o", color=color, label=f"{policy} takeover")
    if knee.knee_index is not None:
        point = curve.row(knee.knee_index, named=True)
        axes.plot(
            point["switch_share"],
            point["accuracy"],
            marker="*",
            markersize=11,
            color=BLACK,
            linestyle="none",
            label=f"knee: {point['switch_share']:.2%} of tokens",
        )
    shown = [*curve["accuracy_low"].drop_nulls(), *curve["accuracy_high"].drop_nulls()]
    shown += [a for a in (knee.base_accuracy, knee.rl_accuracy) if a is not None]
    pad = 0.06 * ((max(shown) - min(shown)) or 1.0)
    axes.set_ylim(min(shown) - pad, max(shown) + pad)
    positive = share[share > 0]
    if positive.size >= 2 and positive.max() / positive.min() > 20:
        axes.set_xscale("log")
    percent_axis(axes.xaxis)
    percent_axis(axes.yaxis, decimals=0)
    axes.set_xlabel("taken-over tokens (% of generated tokens)")
    axes.set_ylabel("accuracy (mean@n, %)")
    axes.grid(True)
    legend_below(axes, own_figure=ax is None, ncols=2, title=BANDS)
    return figure
