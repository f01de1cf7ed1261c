"""`deckyard baseline`: SQL per loop for an idle window (and a mixed one), as a table or JSON.

The measuring (`deckyard.cli.baseline_measure`) and the load (`deckyard.cli.baseline_load`)
start a whole instrumented node; they are imported only when the command runs.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from deckyard.cli.common import load_settings


def baseline(
    idle: Annotated[float, typer.Option("--idle", min=1, help="Seconds of idle window.")] = 60,
    mixed: Annotated[
        float,
        typer.Option("--mixed", min=0, help="Then seconds of mixed load (edits, shots, builds)."),
    ] = 0,
    database_url: Annotated[
        str | None, typer.Option("--database", help="Database URL (default: a fresh SQLite).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run the instrumented server and print SQL per loop for an idle window (writes must be 0)."""
    from deckyard.cli.baseline_load import mixed_load
    from deckyard.cli.baseline_measure import as_dict, run_baseline

    with tempfile.TemporaryDirectory(prefix="deckyard-baseline-") as tmp:
        settings = load_settings(
            database_url=database_url or f"sqlite:///{tmp}/baseline.db", data_dir=tmp
        )
        reports = asyncio.run(run_baseline(settings, idle, mixed_load if mixed else None, mixed))
    if as_json:
        typer.echo(json.dumps(as_dict(reports), indent=2))
        return
    out = Console(highlight=False)
    for r in reports:
        table = Table(
            "loop",
            "reads/s",
            "writes/s",
            "write tx/s",
            "zero-row writes",
            "ticks",
            "p50 ms",
            "p95 ms",
            title=f"{r.name}: {r.seconds:.1f} s, database is locked: "
            f"{r.locked_errors}, RSS {r.rss_bytes / 2**20:.0f} MiB, with renderers (PSS) "
            f"{r.tree_pss_bytes / 2**20:.0f} MiB",
        )
        for row in r.loops:
            table.add_row(
                row["loop"],
                f"{row['reads_per_s']:.3f}",
                f"{row['writes_per_s']:.3f}",
                f"{row['write_tx_per_s']:.3f}",
                str(row["zero_row_writes"]),
                str(row["ticks"]),
                f"{row['tick_p50_ms']:.2f}",
                f"{row['tick_p95_ms']:.2f}",
            )
        out.print(table)
