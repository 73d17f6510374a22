"""Which divergent tokens carry the gain: cross-sampling and takeover curves (Figs. 7, 8)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
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
from divscope.schema import SETTING_COLUMNS

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
SETTING_MARKERS = ("o", "s", "^", "D", "v", "P")
"""Markers of a policy's successive settings (its lines share the policy's colour)."""


def _budget_label(budget: int) -> str:
    return "∞" if budget == UNLIMITED else str(budget)


def _shade(color: str, index: int, count: int) -> tuple[float, float, float]:
    """The policy colour for its `index`-th of `count` settings, lighter for later ones."""
    towards_white = 0.6 * index / (count - 1) if count > 1 else 0.0
    return tuple(c + (1 - c) * towards_white for c in to_rgb(color))


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

    Each policy is a line with its problem-level bootstrap band; a policy run at several
    settings (e.g. two `eps`) gets one line per setting, in lighter shades of its colour,
    labelled with the setting columns that vary, e.g. "forward (eps 0.05)". The base and RL
    controls are dashed lines over their bands (all their settings pooled); the
    random-position baseline is grey. Budgets are evenly spaced, with "∞" for an unlimited
    budget. Panels without any of their policies are left out.

    Args:
        results: cross-sample results (docs/contracts.md, "Cross-sample results") with the controls.
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
    curve = curve.with_columns(analyses.setting_labels(curve, separator=" "))
    settings = [c for c in SETTING_COLUMNS if c in curve.columns]
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
            lines = cells.filter(pl.col("policy") == policy).partition_by(
                settings or "policy", maintain_order=True
            )
            for index, line in enumerate(lines):
                rows = line.sort(pl.col("budget").replace(UNLIMITED, np.iinfo(np.int32).max))
                x = [where[b] for b in rows["budget"]]
                color = _shade(POLICY_COLORS.get(policy, BLACK), index, len(lines))
                setting = rows["setting"][0]
                low, high = rows["accuracy_low"], rows["accuracy_high"]
                panel.fill_between(x, low, high, color=color, alpha=0.2, linewidth=0)
                panel.plot(
                    x,
                    rows["accuracy"],
                    marker=SETTING_MARKERS[index % len(SETTING_MARKERS)],
                    color=color,
                    linestyle=":" if policy == "random" else "-",
                    label=f"{policy} ({setting})" if setting else policy,
                )
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
