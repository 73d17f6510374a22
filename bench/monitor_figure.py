"""Draw a lab GRPO run's monitor: JS > 0.1 share, Gini of CE and accuracy against the round.

Reads the `summary.jsonl` of an evolution directory written by `divscope lab build --monitor`
(OUT/monitor) or `bench/monitor.py --evolution DIR`, and draws three panels against the GRPO
round: (a) the probe's share of tokens with JS > 0.1, (b) the Gini of CE (`ce_base_rl`) over
the probe's tokens, (c) accuracy: the mean reward of the rounds since the previous measurement
(training accuracy, 64 rollouts a round) and the probe's own accuracy (its 32 responses).

    python bench/monitor_figure.py runs/lab-monitor docs/figures/lab-monitor.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from divscope.figures.style import (  # noqa: E402
    BLACK,
    DOUBLE_COLUMN,
    RL_COLOR,
    figure_function,
    panel_title,
    panels,
    percent_axis,
)
from divscope.lab.monitor import PROBE_ACCURACY, REWARD  # noqa: E402
from divscope.monitor import EvolutionDir  # noqa: E402


@figure_function
def monitor_figure(summary):
    figure, (share, gini, accuracy) = panels(None, 3, width=DOUBLE_COLUMN)
    steps = summary["step"]
    share.plot(steps, summary["divscope/js_above_0.1"], marker="o", color=RL_COLOR)
    share.set_ylim(bottom=0)
    percent_axis(share.yaxis)
    share.set_ylabel("probe tokens with JS > 0.1 (%)")
    panel_title(share, "a", "divergent share")
    gini.plot(steps, summary["divscope/ce_gini"], marker="o", color=RL_COLOR)
    # A fixed span of 0.1 at least, so that a flat curve looks flat.
    gini.set_ylim(min(0.9, summary["divscope/ce_gini"].min() - 0.01), 1.0)
    gini.set_ylabel("Gini of CE over probe tokens")
    panel_title(gini, "b", "concentration")
    accuracy.plot(steps, summary[REWARD], marker="o", color=RL_COLOR, label="training reward")
    accuracy.plot(
        steps, summary[PROBE_ACCURACY], marker="s", color=BLACK, linestyle="--", label="probe"
    )
    accuracy.set_ylim(0, 1)
    percent_axis(accuracy.yaxis)
    accuracy.set_ylabel("accuracy (%)")
    accuracy.legend(loc="lower right")
    panel_title(accuracy, "c", "accuracy")
    for axes in (share, gini, accuracy):
        axes.set_xlabel("GRPO round")
    return figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evolution", type=Path, help="the evolution directory")
    parser.add_argument("out", type=Path, help="the PNG to write")
    args = parser.parse_args()
    summary = EvolutionDir(args.evolution).summary().sort("step")
    monitor_figure(summary).savefig(args.out)
    print(
        summary.select("step", "divscope/js_above_0.1", "divscope/ce_gini", REWARD, PROBE_ACCURACY)
    )


if __name__ == "__main__":
    main()
