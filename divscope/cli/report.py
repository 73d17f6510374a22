"""`divscope report`: one self-contained HTML file of the study, with a token-level viewer."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(result, arguments: dict[str, Any]) -> None:
    """What the page holds, and where it is."""
    typer.echo(
        f"Wrote {result.out} ({result.bytes / 2**20:.1f} MiB): {len(result.figures)} figures "
        f"({len(result.skipped)} skipped), {result.n_responses} responses in the token viewer."
    )


COMMAND = Command(
    "divscope.reporting.report:report",
    present,
    example="divscope report runs/tokens.parquet -o runs/report.html",
)
