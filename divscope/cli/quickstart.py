"""`divscope quickstart`: the whole study on the lab models, in one command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope import defaults
from divscope.cli import options


def quickstart(
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Output directory; a rerun resumes it, skipping the stages done with the same "
            "settings.",
        ),
    ] = defaults.QUICKSTART_OUT,
    lab: Annotated[
        Path,
        typer.Option(
            "--lab", help="The lab family (divscope lab build); default: the committed one."
        ),
    ] = defaults.LAB,
    fast: Annotated[
        bool,
        typer.Option(
            "--fast",
            help="A small study (a few prompts, samples and budgets; PNG figures only) that "
            "checks every stage end to end; its intervals are wide.",
        ),
    ] = False,
    overwrite: options.Overwrite = False,
) -> None:
    """Run the whole study on the lab models: generate, grade, score, calibrate, cross-sample,
    analyze, plot and report.

    Generates and grades base, RL and SFT samples; scores RL vs base, SFT vs base and each RL
    checkpoint vs base; calibrates the gates; cross-samples (forward, reverse, random,
    rl-replace, gated and the controls) over a budget grid; analyzes, plots every figure and
    writes the HTML report. Prints each stage on stderr, then the headline numbers (sparsity,
    Gini, failure AUROC, forward's recovery at the knee) and where every file is. Interrupted?
    Run it again: it resumes.
    """
    from divscope.lab_study import quickstart as run

    report = run(out, lab=lab, fast=fast, overwrite=overwrite)
    typer.echo(report.format())
