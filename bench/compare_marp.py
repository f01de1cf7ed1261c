"""`deckyard render` against Marp CLI on the same generated deck (issue 12).

For each deck size both tools run alternated (which one goes first flips every repetition), each
run in a fresh output folder:

- Deckyard: `deckyard render DECK --out OUT --format png,pdf --no-cache` (every page validated
  and rendered, one PNG per page, one PDF; nothing reused from an earlier run), on its embedded
  SQLite.
- Marp CLI: `marp --images png` then `marp --pdf` on the Markdown form of the same slides,
  `CHROME_PATH=/usr/bin/chromium`; the two commands count as one run.

Measured per run: wall time; CPU seconds of the whole process tree (`RUSAGE_CHILDREN`, with this
process a child subreaper so that orphaned helpers, e.g. Chromium's zygote, are reaped here and
counted); peak RSS of the process tree (sum over every descendant, sampled every 50 ms; shared
pages are counted once per process). Each run must produce every PNG and the PDF, or it fails.

    bench/compare_marp                       # installs Marp CLI, then runs this with --write-docs
    .venv/bin/python bench/compare_marp.py --slides 10,30 --reps 3 [--write-docs] [--profile 30]
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import importlib.metadata
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from marp_deck import Decks, write_decks

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- marp:start -->", "<!-- marp:end -->"
PR_SET_CHILD_SUBREAPER = 36
CHROME = "/usr/bin/chromium"


@dataclass
class Run:
    """One measured run of one tool."""

    tool: str
    slides: int
    wall: float
    cpu: float
    rss_mib: float
    ok: bool
    detail: str = ""


@dataclass
class Result:
    """Every run of the comparison."""

    started: str
    command: str
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    versions: dict[str, str] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process, so their CPU is counted here."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_orphans(deadline_seconds: float = 30.0) -> None:
    """Wait for every remaining descendant (adopted orphans) to exit and reap it."""
    end = time.monotonic() + deadline_seconds
    while time.monotonic() < end:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)
    for child in psutil.Process().children(recursive=True):
        child.kill()
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


class PeakRss:
    """Samples the summed RSS of every descendant of this process until stopped."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for proc in me.children(recursive=True):
                try:
                    total += proc.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            self.peak = max(self.peak, total)
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(
    commands: list[list[str]], env: dict[str, str], cwd: Path
) -> tuple[float, float, float, str]:
    """Run `commands` one after another; wall seconds, CPU seconds, peak RSS MiB, failure."""
    reap_orphans()
    cpu0 = cpu_children()
    failure = ""
    with PeakRss() as rss:
        t0 = time.perf_counter()
        for cmd in commands:
            proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
            if proc.returncode != 0:
                failure = f"{cmd[0]} exit {proc.returncode}: {(proc.stderr or proc.stdout)[-800:]}"
                break
        wall = time.perf_counter() - t0
    reap_orphans()
    return wall, cpu_children() - cpu0, rss.peak / 2**20, failure


def check_outputs(pngs: list[Path], pdf: Path, slides: int) -> str:
    if len(pngs) != slides:
        return f"{len(pngs)} PNGs, expected {slides}"
    if not pdf.is_file() or pdf.stat().st_size == 0:
        return f"no PDF at {pdf}"
    return ""


def run_deckyard(deckyard: str, decks: Decks, out: Path) -> Run:
    env = {**os.environ, "DECKYARD_CHROMIUM_PATH": CHROME}
    cmd = [deckyard, "render", str(decks.deckyard_folder), "--out", str(out)]
    cmd += ["--format", "png,pdf", "--no-cache"]  # every run renders, as Marp's does
    wall, cpu, rss, failure = measure([cmd], env, decks.deckyard_folder.parent)
    failure = failure or check_outputs(
        sorted((out / "pages").glob("*.png")), out / "deck.pdf", decks.slides
    )
    return Run("deckyard", decks.slides, wall, cpu, rss, not failure, failure)


def run_marp(marp: str, decks: Decks, out: Path) -> Run:
    env = {**os.environ, "CHROME_PATH": CHROME}
    base = [marp, "--config-file", str(decks.marp_config), str(decks.marp_markdown)]
    cmds = [
        [*base, "--images", "png", "-o", str(out / "deck.png")],
        [*base, "--pdf", "-o", str(out / "deck.pdf")],
    ]
    wall, cpu, rss, failure = measure(cmds, env, decks.marp_markdown.parent)
    failure = failure or check_outputs(
        sorted(out.glob("deck.*.png")), out / "deck.pdf", decks.slides
    )
    return Run("marp", decks.slides, wall, cpu, rss, not failure, failure)


def versions(marp: str, deckyard: str) -> dict[str, str]:
    def out(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unavailable ({exc})"

    return {
        "marp": out([marp, "--version"]),
        "chromium": out([CHROME, "--version"]),
        "node": out(["node", "--version"]),
        "python": platform.python_version(),
        "deckyard": importlib.metadata.version("deckyard"),
    }


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    if not values:
        return "-"
    return f"{fmt.format(median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def figures(result: Result) -> dict[int, dict[str, dict[str, list[float]]]]:
    table: dict[int, dict[str, dict[str, list[float]]]] = {}
    for run in result.runs:
        if not run.ok:
            continue
        slot = table.setdefault(run.slides, {}).setdefault(
            run.tool, {"wall": [], "cpu": [], "rss": []}
        )
        slot["wall"].append(run.wall)
        slot["cpu"].append(run.cpu)
        slot["rss"].append(run.rss_mib)
    return table


def markdown(result: Result, reps: int) -> str:
    """The `marp` section of docs/benchmarks.md."""
    table = figures(result)
    lines = [
        START,
        "## `deckyard render` vs Marp CLI (`bench/compare_marp.py`)",
        "",
        f"Command: `{result.command}` — {result.started}, load average before/after "
        f"{' '.join(f'{x:.2f}' for x in result.load_before)} / "
        f"{' '.join(f'{x:.2f}' for x in result.load_after)}.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in result.versions.items()) + ".",
        "",
        "Same generated content for both (`bench/marp_deck.py`: each slide a heading and a bullet "
        "list with inline code, CJK and emoji; every fourth slide adds an image, a table, a code "
        "block or a quote; 1280x720; Marp's default theme, and a Deckyard theme close to it). "
        "Deckyard: `deckyard render DECK --out OUT --format png,pdf` (every page validated, a PNG "
        "per page, the PDF). Marp CLI: `marp --images png` then `marp --pdf` "
        "(`CHROME_PATH=/usr/bin/chromium`, Twemoji CDN images off, so neither touches the "
        "network). The tools alternate, fresh output folder per run; median (min-max) of "
        f"{reps} repetitions. CPU: user + system seconds of the whole process tree "
        "(`RUSAGE_CHILDREN`, the harness a child subreaper). RSS: peak of the summed RSS of "
        "every process of the tree (shared pages counted per process).",
        "",
        "| slides | Marp CLI s | deckyard render s | wall ratio | Marp CPU s | deckyard CPU s "
        "| CPU ratio | Marp RSS MiB | deckyard RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for slides in sorted(table):
        marp, dy = table[slides].get("marp"), table[slides].get("deckyard")
        if marp is None or dy is None:
            lines.append(f"| {slides} | failed: see bench/out/marp/results.json | | | | | | | |")
            continue
        ratio = median(dy["wall"]) / median(marp["wall"])
        cpu_ratio = median(dy["cpu"]) / median(marp["cpu"])
        lines.append(
            f"| {slides} | {spread(marp['wall'])} | {spread(dy['wall'])} | {ratio:.2f}x "
            f"| {spread(marp['cpu'])} | {spread(dy['cpu'])} | {cpu_ratio:.2f}x "
            f"| {spread(marp['rss'], '{:.0f}')} | {spread(dy['rss'], '{:.0f}')} |"
        )
    sizes = sorted(s for s in table if "deckyard" in table[s])
    if len(sizes) >= 2:
        small, big = sizes[0], sizes[-1]
        dy_small, dy_big = table[small]["deckyard"], table[big]["deckyard"]
        lines += [
            "",
            f"Deckyard at {big} slides against {small}: time "
            f"{median(dy_big['wall']) / median(dy_small['wall']):.2f}x, RSS "
            f"{median(dy_big['rss']) / median(dy_small['rss']):.2f}x.",
        ]
    failed = [r for r in result.runs if not r.ok]
    if failed:
        lines += ["", f"{len(failed)} run(s) failed (not in the medians): "]
        lines += [f"- {r.tool} at {r.slides}: {r.detail[:300]}" for r in failed]
    lines.append(END)
    return "\n".join(lines)


def write_docs(section: str) -> None:
    text = DOCS.read_text(encoding="utf-8")
    if START in text and END in text:
        head, rest = text.split(START, 1)
        _old, tail = rest.split(END, 1)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOCS.write_text(text, encoding="utf-8")


def profile(deckyard: str, decks: Decks, out: Path, dest: Path) -> None:
    """One `deckyard render` under pyinstrument, its text tree written to `dest`."""
    python = str(Path(deckyard).parent / "python")
    cmd = [
        python,
        "-m",
        "pyinstrument",
        "-r",
        "text",
        "--show-all",
        "-o",
        str(dest),
        "-m",
        "deckyard",
        "render",
        str(decks.deckyard_folder),
        "--out",
        str(out),
        "--format",
        "png,pdf",
        "--no-cache",
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    print(f"profile written to {dest}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slides", default="10,30,100", help="deck sizes, comma-separated")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--marp", default=str(ROOT / "bench/marp/node_modules/.bin/marp"))
    parser.add_argument("--deckyard", default=str(Path(sys.executable).parent / "deckyard"))
    parser.add_argument("--work", type=Path, default=ROOT / "bench/out/marp")
    parser.add_argument("--write-docs", action="store_true", help="rewrite the marp section")
    parser.add_argument("--profile", type=int, default=0, help="also profile a render of N slides")
    args = parser.parse_args()
    sizes = [int(s) for s in args.slides.split(",") if s.strip()]
    become_subreaper()
    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    command = os.environ.get("BENCH_COMMAND") or "python bench/compare_marp.py " + " ".join(
        sys.argv[1:]
    )
    result = Result(
        started=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        command=command,
        load_before=os.getloadavg(),
        versions=versions(args.marp, args.deckyard),
    )
    decks = {n: write_decks(n, args.work / f"decks-{n}") for n in sizes}
    for rep in range(args.reps):
        for n in sizes:
            order = [run_deckyard, run_marp] if rep % 2 == 0 else [run_marp, run_deckyard]
            for fn in order:
                out = args.work / f"out-{n}-{rep}-{fn.__name__}"
                tool = args.deckyard if fn is run_deckyard else args.marp
                run = fn(tool, decks[n], out)
                result.runs.append(run)
                status = "ok" if run.ok else f"FAILED {run.detail[:200]}"
                print(
                    f"rep {rep} {run.tool:8} {n:4} slides: {run.wall:6.2f} s wall "
                    f"{run.cpu:6.2f} s cpu {run.rss_mib:6.0f} MiB {status}",
                    flush=True,
                )
                shutil.rmtree(out, ignore_errors=True)
    result.load_after = os.getloadavg()
    if args.profile:
        n = args.profile
        prof_decks = decks.get(n) or write_decks(n, args.work / f"decks-{n}")
        profile(
            args.deckyard,
            prof_decks,
            args.work / "out-profile",
            args.work / f"profile-render-{n}.txt",
        )
    (args.work / "results.json").write_text(json.dumps(asdict(result), indent=2), encoding="utf-8")
    section = markdown(result, args.reps)
    print(section)
    if args.write_docs:
        write_docs(section)


if __name__ == "__main__":
    main()
