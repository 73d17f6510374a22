"""Which divergent tokens carry the gain: cross-sampling and takeover curves (Figs. 7, 8), the
threshold sweep, recovery per threshold and the switched token pairs (Fig. 52)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from divscope import analyses
from divscope.analyses._frames import Frame
from divscope.analyses.controls import SAMPLING_COLUMNS, format_value
from divscope.analyses.cross_sample import REFERENCE, sampling_label
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
    YELLOW,
    figure_function,
    legend_below,
    panel_title,
    panels,
    percent_axis,
)
from divscope.schema import SETTING_COLUMNS

DEFAULT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("forward: base samples, RL intervenes", ("forward", "random", "random-effective")),
    ("reverse: RL samples, base intervenes", ("reverse",)),
)
"""Panels of `cross_sampling_curves`: title and the policies drawn in it."""
POLICY_COLORS = {
    "forward": GREEN,
    "reverse": PURPLE,
    "random": GREY,
    "random-effective": BLACK,
    "rl-replace": ORANGE,
    "gated": SKY_BLUE,
    "rast": YELLOW,
    "base": BASE_COLOR,
}
UNLIMITED = -1
RANDOM_CONTROLS = {"random": ":", "random-effective": "-."}
"""The random baselines beside forward and their line styles: `random` (random positions at
a per-step rate) and `random-effective` (as many effective switches as forward)."""
BANDS = "shaded: 95% problem-bootstrap intervals"
SETTING_MARKERS = ("o", "s", "^", "D", "v", "P")
"""Markers of a policy's successive settings (its lines share the policy's colour)."""


def _budget_label(budget: int) -> str:
    return "∞" if budget == UNLIMITED else str(budget)


def _effective_text(rows: pl.DataFrame, label: str) -> str:
    """`random 0.07% at ∞`: a line's effective share (switches whose token differs from an
    independent draw of the primary, pooled over tokens) at its last (largest) budget."""
    share, budget = rows["effective_share_pooled"][-1], rows["budget"][-1]
    text = "-" if share is None else f"{100 * share:.2f}%"
    return f"{label} {text} at {_budget_label(budget)}"


def _shade(color: str, index: int, count: int) -> tuple[float, float, float]:
    """The policy colour for its `index`-th of `count` settings, lighter for later ones."""
    towards_white = 0.6 * index / (count - 1) if count > 1 else 0.0
    return tuple(c + (1 - c) * towards_white for c in to_rgb(color))


PAIR_POLICIES = ("forward", "gated", "rl-replace", "reverse")
"""The policy `token_pairs` draws by default: the first of these with switches."""
SAMPLING_STYLES = ("--", ":", "-.")
"""Line styles of the controls' reference lines, one per sampling drawn in a panel."""


def _measure(recovery_at: int | None) -> tuple[str, str]:
    """The curve column drawn and its axis label: accuracy (mean@n) or pass@k."""
    if recovery_at is None:
        return "accuracy", "accuracy (mean@n, %)"
    return "pass_at_k", f"pass@{recovery_at} (%)"


def _reference_policy(reference: analyses.Reference, rl_policy: str) -> tuple[str, str]:
    """The curve `policy` of the recovery's upper bound, and its name in legends."""
    if reference is None:
        return rl_policy, "RL model"
    if isinstance(reference, str):
        return reference, reference
    return REFERENCE, "reference model"


def _same_values(row: dict, columns: Sequence[str]) -> pl.Expr:
    """True on the rows whose `columns` equal `row`'s (null equal to null)."""
    return (
        pl.all_horizontal(pl.col(c).eq_missing(row[c]) for c in columns)
        if columns
        else pl.lit(True)
    )


def _control_lines(
    axes: Axes,
    curve: pl.DataFrame,
    drawn: pl.DataFrame,
    controls: Sequence[tuple[str, str, str]],
    measure: str,
) -> None:
    """The matched controls of the drawn rows: per sampling among them, each control's score as
    a horizontal line over its band, named with the sampling when there are several.

    Args:
        axes: the panel.
        curve: the whole curve (its control rows).
        drawn: the rows drawn in the panel.
        controls: (curve policy, legend name, colour) of each control.
        measure: the column drawn.
    """
    sampling = [c for c in SAMPLING_COLUMNS if c in curve.columns]
    samplings = (
        drawn.select(sampling).unique(maintain_order=True).rows(named=True) if sampling else [{}]
    )
    for index, at in enumerate(samplings):
        suffix = f", {sampling_label(at)}" if len(samplings) > 1 else ""
        for policy, name, color in controls:
            same = pl.col("policy") == policy
            if policy != REFERENCE:
                same = same & _same_values(at, sampling)
            rows = curve.filter(same)
            if rows.height != 1 or (policy == REFERENCE and index > 0):
                continue
            row = rows.row(0, named=True)
            if row[measure] is None:
                continue
            if row[f"{measure}_low"] is not None:
                axes.axhspan(
                    row[f"{measure}_low"],
                    row[f"{measure}_high"],
                    color=color,
                    alpha=0.1,
                    linewidth=0,
                )
            axes.axhline(
                row[measure],
                color=color,
                linestyle=SAMPLING_STYLES[index % len(SAMPLING_STYLES)],
                linewidth=1.0,
                label=f"{name} ({row[measure]:.0%}{suffix})",
            )


@figure_function
def cross_sampling_curves(
    results: Frame,
    ax: Sequence[Axes] | None = None,
    *,
    groups: Sequence[tuple[str, Sequence[str]]] = DEFAULT_GROUPS,
    reference: analyses.Reference = None,
    recovery_at: int | None = None,
    base_policy: str = "base",
    rl_policy: str = "rl",
    n_boot: int = 1000,
    seed: int = 0,
) -> Figure:
    """Accuracy (or pass@k) against the intervention budget, forward and reverse (Figs. 7, 8).

    Each policy is a line with its problem-level bootstrap band; a policy run at several
    settings (e.g. two `eps`) gets one line per setting, in lighter shades of its colour,
    labelled with the setting columns that vary, e.g. "forward (eps 0.05)". The controls
    matched to the drawn settings (the base model and the reference, by default the RL
    model; `analyses.cross_sampling_curve`) are dashed lines over their bands, one per
    sampling of the drawn settings; the random-position baseline is grey. Budgets are evenly
    spaced, with "∞" for an unlimited budget. Panels without any of their policies are left
    out.

    Args:
        results: cross-sample results (docs/contracts.md, "Cross-sample results") with the controls.
        ax: one axes per drawn panel (default: a new figure).
        groups: (title, policies) per panel.
        reference: the upper bound (as `analyses.cross_sampling_curve`): None for the RL
            control, a policy label, or a third model's graded responses.
        recovery_at: None to draw accuracy (mean@n), or the k of pass@k.
        base_policy: the base-model control.
        rl_policy: the RL-model control.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.

    Raises:
        DivscopeError: none of the groups' policies is in the results.

    >>> accuracy = {("base", -1): 0.25, ("rl", -1): 0.75,
    ...     ("forward", 0): 0.25, ("forward", 2): 0.5, ("forward", 8): 0.75}
    >>> results = pl.DataFrame([{"prompt_id": f"p{i % 4}", "policy": policy, "budget": budget,
    ...     "n_tokens": 100, "n_switches": max(budget, 0), "n_effective": max(budget, 0),
    ...     "correct": i < 8 * share}
    ...     for (policy, budget), share in accuracy.items() for i in range(8)])
    >>> cross_sampling_curves(results, n_boot=20).axes[0].get_xlabel()
    'intervention budget (max. switched tokens)'
    """
    measure, y_label = _measure(recovery_at)
    curve = analyses.cross_sampling_curve(
        results,
        reference=reference,
        recovery_at=recovery_at,
        base_policy=base_policy,
        rl_policy=rl_policy,
        n_boot=n_boot,
        seed=seed,
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
    top, top_name = _reference_policy(reference, rl_policy)
    controls = [(base_policy, "base model", BASE_COLOR), (top, top_name, RL_COLOR)]
    width = DOUBLE_COLUMN if len(drawn) > 1 else SINGLE_COLUMN
    figure, axes = panels(ax, len(drawn), width=width, height=2.6, sharey=True)
    for letter, panel, (title, policies) in zip("abcdef", axes, drawn, strict=False):
        cells = curve.filter(pl.col("policy").is_in(policies))
        budgets = sorted(set(cells["budget"]), key=lambda b: (b == UNLIMITED, b))
        where = {b: i for i, b in enumerate(budgets)}
        _control_lines(panel, curve, cells, controls, measure)
        shares: list[str] = []  # each line's effective share at its largest budget
        for policy in policies:
            lines = cells.filter(pl.col("policy") == policy).partition_by(
                settings or "policy", maintain_order=True
            )
            for index, line in enumerate(lines):
                rows = line.sort(pl.col("budget").replace(UNLIMITED, np.iinfo(np.int32).max))
                x = [where[b] for b in rows["budget"]]
                color = _shade(POLICY_COLORS.get(policy, BLACK), index, len(lines))
                setting = rows["setting"][0]
                low, high = rows[f"{measure}_low"], rows[f"{measure}_high"]
                panel.fill_between(x, low, high, color=color, alpha=0.2, linewidth=0)
                panel.plot(
                    x,
                    rows[measure],
                    marker=SETTING_MARKERS[index % len(SETTING_MARKERS)],
                    color=color,
                    linestyle=RANDOM_CONTROLS.get(policy, "-"),
                    label=f"{policy} ({setting})" if setting else policy,
                )
                if "effective_share_pooled" in rows.columns:
                    shares.append(_effective_text(rows, panel.lines[-1].get_label()))
        if RANDOM_CONTROLS.keys() & set(policies) and shares:
            panel.text(
                0.02, 0.98, "effective switches, % of tokens:\n" + "\n".join(shares),
                transform=panel.transAxes, va="top", fontsize="x-small",
            )  # fmt: skip
        panel.set_xticks(range(len(budgets)), [_budget_label(b) for b in budgets])
        panel.set_xlabel("intervention budget (max. switched tokens)")
        panel_title(panel, letter, title)
        panel.grid(True, axis="y")
        percent_axis(panel.yaxis, decimals=0)
    axes[0].set_ylabel(y_label)
    handles = {}
    for panel in axes:
        for handle, label in zip(*panel.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    figure.legend(
        handles.values(),
        handles.keys(),
        loc="outside lower center",
        ncols=min(len(handles), 4),
        title=BANDS,
    )
    return figure


@figure_function
def takeover_knee(
    results: Frame,
    ax: Axes | None = None,
    *,
    policy: str = "gated",
    reference: analyses.Reference = None,
    recovery_at: int | None = None,
    base_policy: str = "base",
    rl_policy: str = "rl",
    n_boot: int = 1000,
    seed: int = 0,
) -> Figure:
    """Pass@k (or accuracy) against ρ̄, the mean takeover rate, the knee marked (the takeover
    paper).

    Each point is one setting of the takeover policy at ρ̄, the mean over its responses of
    n_switches / n_tokens, labelled by what varies (over a calibration of several rates: its
    rate r, the paper's sweep); the star marks the Kneedle knee, past which taking over more
    tokens adds little. The matched base control and the reference (by default the guide
    model's control; the paper's is a same-size thinking model) are dashed lines. With at least
    two benchmarks the measure is the per-benchmark average (the paper's).

    Args:
        results: cross-sample results with the takeover policy and the controls.
        ax: axes to draw into (default: a new single-column figure).
        policy: the takeover policy.
        reference: the upper bound (as `analyses.cross_sampling_curve`).
        recovery_at: None to draw accuracy (mean@n), or the k of pass@k (the paper's Pass@8).
        base_policy: the base-model control.
        rl_policy: the RL-model control.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.

    >>> accuracy = {("base", None): 0.25, ("rl", None): 0.75, ("gated", 4.0): 0.25,
    ...     ("gated", 2.0): 0.5, ("gated", 1.0): 0.75, ("gated", 0.5): 0.75}
    >>> results = pl.DataFrame([{"prompt_id": f"p{i % 4}", "policy": policy, "budget": -1,
    ...     "eps": eps, "n_tokens": 100, "n_switches": int(8 / eps) if eps else 0,
    ...     "n_effective": int(4 / eps) if eps else 0, "correct": i < 8 * share}
    ...     for (policy, eps), share in accuracy.items() for i in range(8)])
    >>> takeover_knee(results, n_boot=20).axes[0].get_xlabel()
    "mean takeover rate ρ̄ (% of a response's tokens)"
    """
    knee = analyses.takeover_knee(
        results,
        policy,
        reference=reference,
        recovery_at=recovery_at,
        base_policy=base_policy,
        rl_policy=rl_policy,
        n_boot=n_boot,
        seed=seed,
    )
    measure, y_label = _measure(recovery_at)
    if knee.average == "benchmarks":
        y_label = y_label.replace(" (", ", per-benchmark average (")
    curve = knee.curve
    figure, (axes,) = panels(ax, height=2.9)
    _, top_name = _reference_policy(reference, rl_policy)
    top_name = "guide model" if reference is None else top_name
    for value, name, color in (
        (knee.base_value, "base model", BASE_COLOR),
        (knee.reference_value, top_name, RL_COLOR),
    ):
        if value is not None:
            axes.axhline(
                value, color=color, linestyle="--", linewidth=1.0, label=f"{name} ({value:.0%})"
            )
    rho = curve["rho_mean"].to_numpy()
    color = POLICY_COLORS.get(policy, BLACK)
    axes.fill_between(
        rho, curve[f"{measure}_low"], curve[f"{measure}_high"], color=color, alpha=0.2, linewidth=0
    )
    axes.plot(rho, curve[measure], marker="o", color=color, label=f"{policy} takeover")
    for x, y, label in zip(rho, curve[measure], curve["setting"], strict=True):
        if label and y is not None:
            axes.annotate(
                label.replace("rate=", "r="), (x, y), textcoords="offset points",
                xytext=(3, -9), fontsize=6, color=color,
            )  # fmt: skip
    if knee.knee_index is not None:
        point = curve.row(knee.knee_index, named=True)
        axes.plot(
            point["rho_mean"],
            point[measure],
            marker="*",
            markersize=11,
            color=BLACK,
            linestyle="none",
            label=f"knee: ρ̄ = {point['rho_mean']:.2%}"
            + (f" ({point['setting'].replace('rate=', 'r=')})" if point["setting"] else ""),
        )
    shown = [*curve[f"{measure}_low"].drop_nulls(), *curve[f"{measure}_high"].drop_nulls()]
    shown += [v for v in (knee.base_value, knee.reference_value) if v is not None]
    pad = 0.06 * ((max(shown) - min(shown)) or 1.0)
    axes.set_ylim(min(shown) - pad, max(shown) + pad)
    positive = rho[rho > 0]
    if positive.size >= 2 and positive.max() / positive.min() > 20:
        axes.set_xscale("log")
    percent_axis(axes.xaxis)
    percent_axis(axes.yaxis, decimals=0)
    axes.set_xlabel("mean takeover rate ρ̄ (% of a response's tokens)")
    axes.set_ylabel(y_label)
    axes.grid(True)
    legend_below(axes, own_figure=ax is None, ncols=2, title=BANDS)
    return figure


@figure_function
def threshold_sensitivity(results: Frame, ax: Sequence[Axes] | None = None) -> Figure:
    """The core paper's threshold sweep: effective/total switches and accuracy against ε.

    Panel (a) draws, per setting other than ε (policy, budget, ...), the share of switches that
    change the token: solid against an independent draw of the primary (`n_effective`, the
    papers' count), dashed against its coupled draw from the step's shared uniform
    (`n_effective_coupled`, where present).
    Panel (b) draws accuracy (mean@n). A log ε axis when the thresholds span more than a
    decade.

    Args:
        results: cross-sample results with settings at several `eps`
            (`divscope cross-sample --eps 0.01,0.05,0.1`).
        ax: two axes (default: a new double-column figure).

    Raises:
        DivscopeError: no setting was run at more than one `eps` (nothing to sweep).

    >>> accuracy = {("base", -1, None): 0.25, ("rl", -1, None): 0.75,
    ...     ("forward", 4, 0.01): 0.75, ("forward", 4, 0.1): 0.5, ("forward", 4, 0.3): 0.25}
    >>> results = pl.DataFrame([{"prompt_id": f"p{i % 4}", "policy": policy, "budget": budget,
    ...     "eps": eps, "n_tokens": 100, "n_switches": 4 if eps else 0,
    ...     "n_effective": int(0.4 / eps) if eps else 0, "correct": i < 8 * share}
    ...     for (policy, budget, eps), share in accuracy.items() for i in range(8)])
    >>> [axes.get_ylabel() for axes in threshold_sensitivity(results).axes]
    ['effective / total switches (%)', 'accuracy (mean@n, %)']
    """
    table = analyses.threshold_sensitivity(results)
    swept = {len(set(table.filter(policy=p)["eps"])) for p in table["policy"]}
    if max(swept, default=0) < 2:
        raise DivscopeError(
            "threshold_sensitivity: no policy was run at several eps; run divscope cross-sample "
            "with --policy forward and several --eps (e.g. --eps 0.01,0.05,0.1)."
        )
    figure, (ratios, accuracy) = panels(ax, 2, width=DOUBLE_COLUMN, height=2.5)
    others = [
        c for c in ("policy", "budget", *SETTING_COLUMNS) if c in table.columns and c != "eps"
    ]
    lines = table.partition_by(others, maintain_order=True)
    per_policy: dict[str, int] = {}
    for line in lines:
        rows = line.sort("eps")
        first = rows.row(0, named=True)
        policy = first["policy"]
        index = per_policy[policy] = per_policy.get(policy, -1) + 1
        count = sum(1 for other in lines if other["policy"][0] == policy)
        color = _shade(POLICY_COLORS.get(policy, BLACK), index, count)
        label = policy if first["budget"] == UNLIMITED else f"{policy} (budget {first['budget']})"
        eps = rows["eps"].to_numpy()
        ratios.plot(eps, rows["effective_ratio"], marker="o", color=color, label=label)
        if rows["effective_coupled_ratio"].null_count() < rows.height:
            ratios.plot(
                eps,
                rows["effective_coupled_ratio"],
                marker="s",
                color=color,
                linestyle="--",
                label=f"_{label}, coupled",
            )
        accuracy.plot(eps, rows["accuracy"], marker="o", color=color)
    thresholds = table["eps"].to_numpy()
    for letter, panel, title in (
        ("a", ratios, "effective switches / all switches"),
        ("b", accuracy, "accuracy"),
    ):
        if (thresholds > 0).all() and thresholds.max() / thresholds.min() > 10:
            panel.set_xscale("log")
        panel.set_xlabel("switch threshold ε (JS)")
        panel_title(panel, letter, title)
        panel.grid(True)
        percent_axis(panel.yaxis, decimals=0)
    ratios.set_ylabel("effective / total switches (%)")
    accuracy.set_ylabel("accuracy (mean@n, %)")
    draws = [
        Line2D([], [], color=BLACK, marker="o", label="independent draw"),
        Line2D([], [], color=BLACK, marker="s", linestyle="--", label="coupled draw"),
    ]
    handles = [*ratios.get_legend_handles_labels()[0], *draws]
    if ax is None:
        figure.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4))
    else:
        ratios.legend(handles=handles, loc="best")
    return figure


@figure_function
def threshold_recovery(
    results: Frame,
    ax: Sequence[Axes] | None = None,
    *,
    policies: Sequence[str] = ("forward", "reverse"),
    reference: analyses.Reference = None,
    recovery_at: int | None = None,
    base_policy: str = "base",
    rl_policy: str = "rl",
    n_boot: int = 1000,
    seed: int = 0,
) -> Figure:
    """Recovery against the intervention budget, one curve per switch threshold ε.

    One panel per policy of `policies` run with an `eps` (forward, reverse); each ε (and any
    other setting column that varies) is a line over its problem-bootstrap band, lighter for
    larger ε (`analyses.threshold_curves`). Budgets are evenly spaced, "∞" for unlimited.

    Args:
        results: graded cross-sample results with the controls and settings at several `eps`
            (`divscope cross-sample --eps 0.01,0.05,0.1,0.2`).
        ax: one axes per drawn panel (default: a new figure).
        policies: the policies drawn, one panel each.
        reference: the upper bound (as `analyses.cross_sampling_curve`).
        recovery_at: None for recovery on mean@n, or the k of pass@k.
        base_policy: the base-model control.
        rl_policy: the RL-model control.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.

    Raises:
        DivscopeError: none of `policies` has a recovery at an `eps` (no such setting, or no
            controls to recover against).

    >>> accuracy = {("base", -1, None): 0.25, ("rl", -1, None): 0.75,
    ...     ("forward", 4, 0.01): 0.75, ("forward", 4, 0.1): 0.5, ("forward", 4, 0.3): 0.25}
    >>> results = pl.DataFrame([{"prompt_id": f"p{i % 4}", "policy": policy, "budget": budget,
    ...     "eps": eps, "n_tokens": 100, "n_switches": 4 if eps else 0,
    ...     "n_effective": int(0.4 / eps) if eps else 0, "correct": i < 8 * share}
    ...     for (policy, budget, eps), share in accuracy.items() for i in range(8)])
    >>> threshold_recovery(results, n_boot=20).axes[0].get_ylabel()
    'recovery of the gain (mean@n)'
    """
    table = analyses.threshold_curves(
        results,
        reference=reference,
        recovery_at=recovery_at,
        base_policy=base_policy,
        rl_policy=rl_policy,
        n_boot=n_boot,
        seed=seed,
    ).filter(pl.col("policy").is_in(list(policies)) & pl.col("recovery").is_not_null())
    drawn = [p for p in policies if p in set(table["policy"])]
    if not drawn:
        raise DivscopeError(
            f"threshold_recovery: no recovery of {', '.join(policies)} at an eps; run divscope "
            "cross-sample with those policies, --eps and the base and rl controls, then grade."
        )
    measure = "mean@n" if recovery_at is None else f"pass@{recovery_at}"
    others = [c for c in ("budget", *SETTING_COLUMNS) if c in table.columns]
    figure, axes = panels(ax, len(drawn), width=DOUBLE_COLUMN if len(drawn) > 1 else SINGLE_COLUMN,
                          height=2.6, sharey=True)  # fmt: skip
    for letter, panel, policy in zip("abcdef", axes, drawn, strict=False):
        rows = table.filter(pl.col("policy") == policy)
        budgets = sorted(set(rows["budget"]), key=lambda b: (b == UNLIMITED, b))
        where = {b: i for i, b in enumerate(budgets)}
        lines = rows.partition_by(others[1:], maintain_order=True)
        labels = analyses.setting_labels(pl.concat([line.head(1) for line in lines]), separator=" ")
        for index, (line, label) in enumerate(zip(lines, labels, strict=True)):
            line = line.sort(pl.col("budget").replace(UNLIMITED, np.iinfo(np.int32).max))
            x = [where[b] for b in line["budget"]]
            color = _shade(POLICY_COLORS.get(policy, BLACK), index, len(lines))
            panel.fill_between(
                x, line["recovery_low"], line["recovery_high"], color=color, alpha=0.2, linewidth=0
            )
            panel.plot(
                x,
                line["recovery"],
                marker=SETTING_MARKERS[index % len(SETTING_MARKERS)],
                color=color,
                label=label.replace("eps", "ε") or f"ε {format_value(line['eps'][0])}",
            )
        panel.axhline(0, color=BASE_COLOR, linestyle="--", linewidth=1.0)
        panel.axhline(1, color=RL_COLOR, linestyle="--", linewidth=1.0)
        panel.set_xticks(range(len(budgets)), [_budget_label(b) for b in budgets])
        panel.set_xlabel("intervention budget (max. switched tokens)")
        panel_title(panel, letter, policy)
        panel.grid(True, axis="y")
        panel.legend(loc="best", title="threshold")
    axes[0].set_ylabel(f"recovery of the gain ({measure})")
    return figure


@figure_function
def token_pairs(
    results: Frame,
    ax: Axes | None = None,
    *,
    policy: str | None = None,
    top: int = 12,
    effective_only: bool = True,
) -> Figure:
    """The most frequent (primary token → intervener's token) swaps at switches (Fig. 52).

    One setting is drawn: of `policy` (default the first of forward, gated, rl-replace,
    reverse with switches), the setting with the most counted switches; its name is in the
    title. Bars are the share of the setting's counted switches.

    Args:
        results: cross-sample results with the switch columns (`switch_primary_tokens`,
            `switch_tokens`, ...).
        ax: axes to draw into (default: a new single-column figure).
        policy: the policy drawn.
        top: pairs drawn.
        effective_only: count only switches that change the token (`analyses.switch_pairs`).

    Raises:
        DivscopeError: no switch of the policy (or of any policy).

    >>> results = pl.DataFrame({"policy": ["forward"] * 2, "budget": [-1, -1],
    ...     "prompt_id": ["a", "b"], "response_ids": [[5, 7, 9], [7, 8]],
    ...     "switch_positions": [[1, 2], [0]], "switch_primary_ids": [[6, 9], [6]],
    ...     "switch_primary_tokens": [[" So", " x"], [" So"]],
    ...     "switch_tokens": [[" Wait", " x"], [" Wait"]]})
    >>> [label.get_text() for label in token_pairs(results).axes[0].get_yticklabels()]
    ["' So' → ' Wait'"]
    """
    pairs = analyses.switch_pairs(results, policy=policy, top=top, effective_only=effective_only)
    if pairs.is_empty():
        raise DivscopeError(
            f"token_pairs: no {'effective ' if effective_only else ''}switch"
            f"{f' of policy {policy!r}' if policy else ''} in the cross-sample results."
        )
    present = list(dict.fromkeys(pairs["policy"]))
    chosen = policy or next((p for p in PAIR_POLICIES if p in present), present[0])
    keys = [c for c in ("policy", "budget", *SETTING_COLUMNS) if c in pairs.columns]
    busiest = (
        pairs.filter(pl.col("policy") == chosen)
        .sort("n_switches", descending=True)
        .row(0, named=True)
    )
    rows = pairs.filter(_same_values(busiest, keys))
    figure, (axes,) = panels(ax, height=0.6 + 0.17 * rows.height)
    labels = [f"'{a}' → '{b}'" for a, b in zip(rows["primary_token"], rows["token"], strict=True)]
    y = np.arange(rows.height)[::-1]
    axes.barh(y, rows["pair_share"], color=POLICY_COLORS.get(chosen, BLACK), height=0.7)
    axes.set_yticks(y, labels, fontfamily="monospace", fontsize=6.5)
    setting = ", ".join(
        f"{c} {_budget_label(busiest[c]) if c == 'budget' else format_value(busiest[c])}"
        for c in keys[1:]
        if busiest[c] is not None and c not in SAMPLING_COLUMNS
    )
    kind = "effective switches" if effective_only else "switches"
    axes.set_title(f"{chosen} ({setting})", loc="left")
    axes.set_xlabel(f"share of its {busiest['n_switches']:,} {kind} (%)")
    axes.set_ylabel("primary → intervener")
    percent_axis(axes.xaxis, decimals=0)
    axes.grid(True, axis="x")
    return figure


@figure_function
def delta_alignment(
    results: Frame,
    ax: Axes | None = None,
    *,
    bins: int = 20,
    n_boot: int = 1000,
    seed: int = 0,
) -> Figure:
    """RAST's delta alignment along the decoded responses: the cosine between the small pair's
    logit delta (rast_rl − rast_base) and the large pair's (rl − base) over relative position,
    one line per setting (e.g. `rast` and `base` trajectories), each labelled with its mean over
    responses and a 95% problem-bootstrap interval (`analyses.delta_alignment`).

    Args:
        results: cross-sample results decoded with `--delta-alignment` (`delta_cosine`).
        ax: axes to draw into (default: a new single-column figure).
        bins: relative-position bins.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.

    Raises:
        DivscopeError: no response has a `delta_cosine` (decode with `--delta-alignment`).

    >>> results = pl.DataFrame({"prompt_id": ["a", "b"] * 2, "budget": -1,
    ...     "policy": ["rast"] * 2 + ["base"] * 2,
    ...     "delta_cosine": [[0.6, 0.5, 0.4], [0.7, 0.6], [0.1, 0.0, 0.1], [0.2, -0.1]]})
    >>> [line.get_label() for line in delta_alignment(results, n_boot=20).axes[0].lines][:2]
    ['base: 0.06 [0.05, 0.07]', 'rast: 0.57 [0.50, 0.65]']
    """
    alignment = analyses.delta_alignment(results, bins=bins, n_boot=n_boot, seed=seed)
    if alignment.summary.is_empty():
        raise DivscopeError(
            "delta_alignment: no `delta_cosine` in the cross-sample results; decode with "
            "`divscope cross-sample --delta-alignment` and all four models (--base, --rl, "
            "--rast-base, --rast-rl)."
        )
    summary = alignment.summary.with_columns(
        analyses.setting_labels(alignment.summary, separator=" ")
    )
    keys = [c for c in ("policy", "budget", *SETTING_COLUMNS) if c in alignment.summary.columns]
    # Room for one legend line per setting below the panel.
    figure, (axes,) = panels(ax, height=2.4 + 0.16 * summary.height)
    budgets = {p: len(set(summary.filter(policy=p)["budget"])) for p in summary["policy"]}
    for i, row in enumerate(summary.iter_rows(named=True)):
        profile = alignment.profile.filter(_same_values(row, keys)).sort("bin_start")
        budget = f" budget {_budget_label(row['budget'])}" if budgets[row["policy"]] > 1 else ""
        name = f"{row['policy']}{budget} {row['setting']}".strip()
        axes.plot(
            profile["bin_start"] + 0.5 / bins,
            profile["delta_cosine"],
            color=POLICY_COLORS.get(row["policy"], BLACK),
            marker=SETTING_MARKERS[i % len(SETTING_MARKERS)],
            markersize=3,
            label=f"{name}: {row['delta_cosine']:.2f} "
            f"[{row['delta_cosine_low']:.2f}, {row['delta_cosine_high']:.2f}]",
        )
    axes.axhline(0, color=GREY, linewidth=0.6)
    axes.set_xlim(0, 1)
    axes.set_xlabel("relative position t/T")
    axes.set_ylabel("cosine(small-pair Δ, large-pair Δ)")
    axes.grid(True)
    legend_below(axes, own_figure=ax is None, ncols=1, title="mean over responses [95% CI]")
    return figure
