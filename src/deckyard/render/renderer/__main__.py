"""`python -m deckyard.render.renderer`: a supervised renderer, started without the `deckyard` CLI.

Supervisors start their renderers this way (`render.processes.renderer_command`): the `deckyard`
command line (typer, rich and every command group: 0.2 s on a quiet machine, over a second at
load 13) is not imported before the renderer's own imports and Chromium's launch, which are on
the start-up path of `deckyard render`. It takes only what a supervisor passes, `--port` and
`--slots`; everything else comes from the environment, as for `deckyard renderer`, which stays
the command for people (secret file, `--generate-secret`, help). Its imports run with the
collector paused (`deckyard.startup`), which also stops the renderer sooner at exit.
"""

from __future__ import annotations

import argparse
import sys

from deckyard.startup import before_exit, heavy_imports

with heavy_imports():
    from deckyard.config import Settings, SettingsError
    from deckyard.render.renderer.main import run_renderer


def main() -> None:
    """Parse `--port` and `--slots`, load the settings (exit 2 when invalid), run the renderer."""
    parser = argparse.ArgumentParser(prog="python -m deckyard.render.renderer")
    parser.add_argument("--port", type=int, help="Port to listen on (0: pick one).")
    parser.add_argument("--slots", type=int, help="Concurrent renders.")
    args = parser.parse_args()
    given = {"renderer_port": args.port, "renderer_slots": args.slots}
    try:
        settings = Settings.load(**{k: v for k, v in given.items() if v is not None})
    except SettingsError as exc:
        for problem in exc.problems:
            print(f"deckyard: {problem}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        run_renderer(settings)
    finally:
        before_exit()


main()
