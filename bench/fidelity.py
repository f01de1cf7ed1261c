"""Fidelity benchmark (issue 29): Deckyard's PNGs beside the original tool's, per slide, with SSIM.

The decks in `bench/fidelity/` (written for this benchmark: Marp with built-in and custom themes,
math, global style, `fit` and backgrounds; reveal.js with hidden slides, vertical stacks,
fragments, lazy media and Markdown with notes; Slidev with layouts, front matter, icons, Mermaid
and a dark colour schema; CJK and emoji in each) are rendered twice in the same run, both on the
system Chromium:

- Deckyard: `deckyard render DECK --out OUT` (PNGs, PDF and site), its exit code, whether
  `deck.pdf` and `site.zip` were written, one PNG per page.
- The original tool: Marp CLI (`marp --images png`, bench/marp), reveal.js's own print view
  (`?print-pdf`, served from a loopback HTTP server, printed to PDF by Playwright, then pdftoppm),
  Slidev's export (`slidev export --format png`, bench/fidelity/node_modules).

Per slide (in order; a count mismatch compares the common prefix and misses the target): both
PNGs are downscaled to 320 px wide, greyscale, and compared with skimage's structural
similarity. Written to the work folder: `results.json` (every slide's SSIM), `sidebyside/`
(Deckyard | peer of each deck's worst slides), and each tool's output.

    bench/fidelity/run                           # installs the peers, then runs this
    bench/.venv/bin/python bench/fidelity.py [--decks marp_gaia,slidev] [--write-docs]
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from playwright.sync_api import sync_playwright
from skimage.metrics import structural_similarity

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_marp import CHROME, DOCS, ROOT, become_subreaper, reap_orphans, versions

from deckyard.decks.validation.result import ValidationStatus

FIDELITY = ROOT / "bench" / "fidelity"
REVEAL_DIST = ROOT / "vendor" / "js" / "node_modules" / "reveal.js" / "dist"
START, END = "<!-- fidelity:start -->", "<!-- fidelity:end -->"
COMPARE_WIDTH = 320
SIDE_WIDTH = 640
WORST_SHOWN = 2
TOOL_TIMEOUT = 600.0
# Playwright's launch arguments of tests/e2e/test_dashboard.py: the same headless system Chromium.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


class Convention(StrEnum):
    """Whose conventions a deck follows, and so which tool is its peer."""

    MARP = "marp"
    REVEAL = "reveal"
    SLIDEV = "slidev"


PEER_NAMES = {
    Convention.MARP: "Marp CLI",
    Convention.REVEAL: "reveal.js print view",
    Convention.SLIDEV: "Slidev export",
}
TARGETS = {Convention.MARP: 0.95, Convention.REVEAL: 0.95, Convention.SLIDEV: 0.90}


@dataclass(frozen=True)
class Deck:
    """One deck of bench/fidelity: its name, convention and source (a .md file or a folder)."""

    name: str
    convention: Convention
    source: str


DECKS = [
    Deck("marp_default", Convention.MARP, "marp_default.md"),
    Deck("marp_gaia", Convention.MARP, "marp_gaia.md"),
    Deck("marp_uncover", Convention.MARP, "marp_uncover.md"),
    Deck("marp_custom", Convention.MARP, "marp_custom.md"),
    Deck("reveal_html", Convention.REVEAL, "reveal_html"),
    Deck("reveal_markdown", Convention.REVEAL, "reveal_markdown"),
    Deck("slidev", Convention.SLIDEV, "slidev.md"),
]


@dataclass
class Side:
    """What one tool produced for one deck: a PNG per slide (None: that slide failed)."""

    ok: bool = False
    exit_code: int | None = None
    seconds: float = 0.0
    pngs: list[str | None] = field(default_factory=list)
    pdf: bool = False
    site: bool = False
    detail: str = ""


@dataclass
class DeckResult:
    """One deck compared: both sides and each slide's SSIM, by position (None: a side has no
    PNG for that slide; it counts as 0 in the mean)."""

    deck: str
    convention: str
    peer: str
    target: float
    deckyard: Side
    original: Side
    ssim: list[float | None] = field(default_factory=list)
    sidebyside: list[str] = field(default_factory=list)

    @property
    def scores(self) -> list[float]:
        return [s if s is not None else 0.0 for s in self.ssim]

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.scores)) if self.ssim else None

    @property
    def worst(self) -> tuple[int, float] | None:
        if not self.ssim:
            return None
        i = int(np.argmin(self.scores))
        return i + 1, self.scores[i]

    @property
    def failed_pages(self) -> int:
        return sum(1 for p in self.deckyard.pngs if p is None)

    @property
    def counts_match(self) -> bool:
        return (
            self.deckyard.ok
            and self.original.ok
            and len(self.deckyard.pngs) == len(self.original.pngs)
        )

    @property
    def met(self) -> bool:
        mean = self.mean
        return (
            self.counts_match
            and self.deckyard.pdf
            and self.deckyard.site
            and mean is not None
            and mean >= self.target
        )


@dataclass
class Result:
    """The whole run."""

    started: str
    command: str
    tree: str
    versions: dict[str, str]
    decks: list[DeckResult] = field(default_factory=list)
    minutes: float = 0.0


def run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[int | None, float]:
    """Run `cmd`, its output to `log`; (exit code or None on time-out, wall seconds)."""
    t0 = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        try:
            proc = subprocess.run(
                cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=TOOL_TIMEOUT
            )
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            code = None
    reap_orphans()
    return code, time.perf_counter() - t0


def tail(log: Path, chars: int = 600) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-chars:].strip()


def numbered(paths: list[Path]) -> list[Path]:
    """`paths` ordered by the last number in each name (`deck.010.png`, `10.png`, `page-10`)."""

    def key(p: Path) -> int:
        found = re.findall(r"\d+", p.stem)
        return int(found[-1]) if found else 0

    return sorted(paths, key=key)


def prepare(work: Path) -> Path:
    """A copy of bench/fidelity's decks, each reveal.js folder with reveal.js's `dist/` and the
    shared `assets/` beside its `index.html` (as a user's deck folder would hold them)."""
    src = work / "decks"
    shutil.copytree(
        FIDELITY, src, ignore=shutil.ignore_patterns("node_modules", ".slidev", "package*.json")
    )
    for deck in DECKS:
        if deck.convention is Convention.REVEAL:
            shutil.copytree(REVEAL_DIST, src / deck.source / "dist")
            shutil.copytree(FIDELITY / "assets", src / deck.source / "assets")
    return src


_STATUSES = "|".join(s.value for s in ValidationStatus)
_CHECK_ROW = re.compile(rf"^│ (\S+) +│ (?:{_STATUSES}) +│", re.MULTILINE)
_ERROR_LINE = re.compile(r"^\s*\S+: error: (.+)$", re.MULTILINE)


def render_deckyard(deckyard: str, deck_path: Path, out: Path) -> Side:
    """`deckyard render` of the deck: exit code, PDF and site written, and each page's PNG in
    deck order from `deckyard-manifest.json` (None for a page that failed)."""
    out.mkdir(parents=True)
    env = {**os.environ, "DECKYARD_CHROMIUM_PATH": CHROME, "COLUMNS": "400"}
    log = out.parent / f"{out.name}.log"
    cmd = [deckyard, "render", str(deck_path), "--out", str(out), "--no-cache"]
    code, seconds = run(cmd, ROOT, env, log)
    manifest = out / "deckyard-manifest.json"
    pngs: list[str | None]
    if manifest.is_file():
        pages = json.loads(manifest.read_text(encoding="utf-8")).get("pages", [])
        pngs = [str(out / p["png"]) if p.get("png") else None for p in pages]
    else:  # nothing written (every page failed): the pages of the CLI's check table
        pngs = [None for _ in _CHECK_ROW.finditer(log.read_text(encoding="utf-8"))]
    side = Side(
        ok=bool(pngs),
        exit_code=code,
        seconds=seconds,
        pngs=pngs,
        pdf=(out / "deck.pdf").is_file() and (out / "deck.pdf").stat().st_size > 0,
        site=(out / "site.zip").is_file() and (out / "site.zip").stat().st_size > 0,
    )
    if code != 0:
        text = log.read_text(encoding="utf-8", errors="replace")
        errors = list(dict.fromkeys(m.group(1).strip() for m in _ERROR_LINE.finditer(text)))
        side.detail = f"exit {code}: " + (" / ".join(errors[:3]) or tail(log))
    return side


def render_peer_cli(
    cmd: list[str], cwd: Path, env: dict[str, str], out: Path, pattern: str
) -> Side:
    """Run a peer's command line; its PNGs are the files matching `pattern` in `out`."""
    log = out.parent / f"{out.name}.log"
    code, seconds = run(cmd, cwd, env, log)
    pngs = numbered(list(out.glob(pattern)))
    side = Side(ok=code == 0 and bool(pngs), exit_code=code, seconds=seconds)
    side.pngs = [str(p) for p in pngs]
    if not side.ok:
        side.detail = f"exit {code}: {tail(log)}"
    return side


def render_marp(marp: str, deck_path: Path, out: Path) -> Side:
    """Marp CLI's PNGs of the deck (`deck.001.png`, …), with bench/fidelity/marp.yml."""
    out.mkdir(parents=True)
    config = str(deck_path.parent / "marp.yml")
    cmd = [marp, "--config-file", config, "--allow-local-files", "--images", "png"]
    cmd += [str(deck_path), "-o", str(out / "deck.png")]
    env = {**os.environ, "CHROME_PATH": CHROME}
    return render_peer_cli(cmd, deck_path.parent, env, out, "deck.*.png")


def render_slidev(slidev: str, deck_path: Path, out: Path) -> Side:
    """Slidev's PNG export of the deck (`1.png`, …) on the system Chromium.

    Slidev runs in bench/fidelity itself, where its packages are (it starts a Vite server on
    localhost for the export and stops it).
    """
    out.mkdir(parents=True)
    cmd = [slidev, "export", deck_path.name, "--format", "png", "--output", str(out / "slides")]
    cmd += ["--executable-path", CHROME, "--timeout", "120000"]
    env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    return render_peer_cli(cmd, FIDELITY, env, out, "slides/*.png")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return


@contextmanager
def loopback_server(root: Path) -> Iterator[str]:
    """An HTTP server of `root` on 127.0.0.1 (a free port) for the block; its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


_PRINT_READY = """() => {
  if (!window.Reveal || !Reveal.isReady()) return false;
  if (document.querySelectorAll('.pdf-page').length === 0) return false;
  const imgs = Array.from(document.images);
  return imgs.every(img => img.complete);
}"""


def render_reveal(base_url: str, deck_path: Path, decks_root: Path, out: Path) -> Side:
    """reveal.js's own print view (`?print-pdf`) printed to PDF, then one PNG per PDF page.

    Fragments print as one page per slide (`pdfSeparateFragments=false`, a reveal.js option
    read from the query), as Deckyard shows every fragment at once.
    """
    out.mkdir(parents=True)
    rel = deck_path.relative_to(decks_root).as_posix()
    url = f"{base_url}/{rel}/index.html?print-pdf&pdfSeparateFragments=false"
    pdf = out / "deck.pdf"
    t0 = time.perf_counter()
    side = Side()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROME, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.goto(url, wait_until="load")
                page.wait_for_function(_PRINT_READY, timeout=60_000)
                page.evaluate("document.fonts.ready")
                page.pdf(path=str(pdf), print_background=True, prefer_css_page_size=True)
            finally:
                browser.close()
        subprocess.run(
            ["pdftoppm", "-png", "-r", "96", str(pdf), str(out / "page")],
            check=True,
            capture_output=True,
            timeout=TOOL_TIMEOUT,
        )
    except Exception as exc:  # a peer that fails is a row, not a crash of the benchmark
        side.detail = f"{type(exc).__name__}: {str(exc)[:600]}"
    reap_orphans()
    side.seconds = time.perf_counter() - t0
    pngs = numbered(list(out.glob("page-*.png")))
    side.pngs = [str(p) for p in pngs]
    side.ok = bool(pngs) and not side.detail
    side.exit_code = 0 if side.ok else 1
    return side


def grey(path: str, size: tuple[int, int]) -> np.ndarray:
    with Image.open(path) as img:
        return np.asarray(img.convert("L").resize(size, Image.Resampling.LANCZOS))


def compare(deckyard_png: str, peer_png: str) -> float:
    """SSIM of the two slides, downscaled to COMPARE_WIDTH px wide (the peer's aspect), grey."""
    with Image.open(peer_png) as img:
        w, h = img.size
    size = (COMPARE_WIDTH, max(8, round(COMPARE_WIDTH * h / w)))
    return float(
        structural_similarity(grey(deckyard_png, size), grey(peer_png, size), data_range=255)
    )


def side_by_side(deckyard_png: str, peer_png: str, peer: str, label: str, dest: Path) -> None:
    """Deckyard | peer, each SIDE_WIDTH px wide, with a caption above."""
    with Image.open(peer_png) as img:
        w, h = img.size
    height = round(SIDE_WIDTH * h / w)
    canvas = Image.new("RGB", (2 * SIDE_WIDTH + 12, height + 28), "white")
    for i, path in enumerate((deckyard_png, peer_png)):
        with Image.open(path) as img:
            canvas.paste(
                img.convert("RGB").resize((SIDE_WIDTH, height)), (i * (SIDE_WIDTH + 12), 28)
            )
    draw = ImageDraw.Draw(canvas)
    draw.text((6, 8), f"Deckyard   ({label})", fill="black")
    draw.text((SIDE_WIDTH + 18, 8), peer, fill="black")
    canvas.save(dest)


def compare_deck(result: DeckResult, work: Path) -> None:
    """Fill in the per-slide SSIM and write the worst slides side by side."""
    dy, peer = result.deckyard.pngs, result.original.pngs
    pairs = [
        (dy[i] if i < len(dy) else None, peer[i] if i < len(peer) else None)
        for i in range(max(len(dy), len(peer)))
    ]
    result.ssim = [round(compare(a, b), 4) if a and b else None for a, b in pairs]
    compared = [(i, a, b) for i, (a, b) in enumerate(pairs) if a and b]
    worst = sorted(compared, key=lambda c: result.scores[c[0]])[:WORST_SHOWN]
    folder = work / "sidebyside"
    folder.mkdir(exist_ok=True)
    for i, a, b in worst:
        dest = folder / f"{result.deck}-slide-{i + 1:02d}.png"
        label = f"{result.deck} slide {i + 1}, SSIM {result.scores[i]:.3f}"
        side_by_side(a, b, result.peer, label, dest)
        result.sidebyside.append(str(dest))


def tree() -> str:
    """The checked-out commit, and whether the working tree differs from it (read-only git)."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return proc.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{head} + uncommitted changes" if dirty else head


def yes(flag: bool) -> str:
    return "yes" if flag else "**no**"


def row(r: DeckResult) -> str:
    dy, peer = r.deckyard, r.original
    counts = f"{len(dy.pngs)} / {len(peer.pngs) if peer.ok else 'failed'}"
    failed = str(r.failed_pages) if r.failed_pages == 0 else f"**{r.failed_pages}**"
    if not r.counts_match:
        counts = f"**{counts}**"
    mean = f"{r.mean:.3f}" if r.mean is not None else "-"
    worst = r.worst
    low = f"{worst[1]:.3f} (slide {worst[0]})" if worst else "-"
    exit_code = "time-out" if dy.exit_code is None else str(dy.exit_code)
    return (
        f"| {r.deck} | {r.peer} | {counts} | {failed} | {mean} | {low} | >= {r.target:.2f} "
        f"| {exit_code} | {yes(dy.pdf)} | {yes(dy.site)} | {'met' if r.met else '**missed**'} |"
    )


def markdown(result: Result) -> str:
    """The fidelity section of docs/benchmarks.md."""
    lines = [
        START,
        "## Fidelity against Marp CLI, reveal.js and Slidev (`bench/fidelity.py`, issue 29)",
        "",
        f"Command: `{result.command}` — {result.started}, {result.minutes:.1f} minutes, "
        f"tree `{result.tree}`.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in result.versions.items()) + ".",
        "",
        "Decks of `bench/fidelity/`, each rendered by `deckyard render DECK --out OUT` and by the "
        "original tool on the same system Chromium, in the same run: Marp CLI "
        "(`marp --images png`, `bench/fidelity/marp.yml`: local files, the custom theme, emoji as "
        "text), reveal.js's print view (`index.html?print-pdf&pdfSeparateFragments=false` from a "
        "loopback server, printed to PDF by Playwright, pdftoppm at 96 dpi), Slidev's export "
        "(`slidev export --format png --executable-path /usr/bin/chromium`). Slides are paired "
        f"by position; SSIM (scikit-image) on both PNGs downscaled to {COMPARE_WIDTH} px wide, "
        "greyscale; a slide one side has no PNG for (a page that failed in Deckyard, a count "
        "mismatch) counts as 0 in the mean. Per-slide SSIM: `bench/out/fidelity/results.json`; "
        "the worst slides of each deck side by side (Deckyard | peer): "
        "`bench/out/fidelity/sidebyside/`.",
        "",
        "| deck | peer | slides Deckyard / peer | pages failed | mean SSIM | min SSIM | target "
        "| deckyard exit | PDF | site | |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [row(r) for r in result.decks]
    failed = [r for r in result.decks if r.deckyard.detail or r.original.detail]
    if failed:
        lines.append("")
        for r in failed:
            for who, side in (("deckyard", r.deckyard), (r.peer, r.original)):
                if side.detail:
                    text = " ".join(side.detail.split())[:300]
                    lines.append(f"- {r.deck}, {who}: {text}")
    lines.append(END)
    return "\n".join(lines)


def write_docs(section: str) -> None:
    """Replace the fidelity section of docs/benchmarks.md, or append it at the end."""
    text = DOCS.read_text(encoding="utf-8")
    if START in text and END in text:
        head, rest = text.split(START, 1)
        _old, tail_text = rest.split(END, 1)
        text = head + section + tail_text
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOCS.write_text(text, encoding="utf-8")


def summary(result: Result) -> dict[str, object]:
    data = asdict(result)
    for deck, r in zip(data["decks"], result.decks, strict=True):
        deck.update(mean=r.mean, worst=r.worst, counts_match=r.counts_match, met=r.met)
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decks", default="", help="deck names, comma-separated (default: all)")
    parser.add_argument("--work", type=Path, default=ROOT / "bench/out/fidelity")
    parser.add_argument("--deckyard", default=str(ROOT / ".venv/bin/deckyard"))
    parser.add_argument("--marp", default=str(ROOT / "bench/marp/node_modules/.bin/marp"))
    parser.add_argument("--slidev", default=str(FIDELITY / "node_modules/.bin/slidev"))
    parser.add_argument("--write-docs", action="store_true", help="rewrite the fidelity section")
    args = parser.parse_args()
    wanted = {d.strip() for d in args.decks.split(",") if d.strip()}
    unknown = wanted - {d.name for d in DECKS}
    if unknown:
        parser.error(f"unknown decks: {', '.join(sorted(unknown))}")
    decks = [d for d in DECKS if not wanted or d.name in wanted]
    become_subreaper()
    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    command = os.environ.get("BENCH_COMMAND", "").strip() or "python bench/fidelity.py " + " ".join(
        sys.argv[1:]
    )
    t0 = time.monotonic()
    info = versions(args.marp, args.deckyard)
    slidev_version = subprocess.run(
        [args.slidev, "--version"], capture_output=True, text=True, cwd=FIDELITY
    ).stdout.strip()
    info["slidev"] = slidev_version or "unavailable"
    info["reveal.js"] = json.loads((REVEAL_DIST.parent / "package.json").read_text())["version"]
    result = Result(
        started=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        command=command,
        tree=tree(),
        versions=info,
    )
    src = prepare(args.work)
    with loopback_server(src) as base_url:
        for deck in decks:
            deck_path = src / deck.source
            out = args.work / deck.name
            out.mkdir()
            dy = render_deckyard(args.deckyard, deck_path, out / "deckyard")
            if deck.convention is Convention.MARP:
                peer = render_marp(args.marp, deck_path, out / "peer")
            elif deck.convention is Convention.REVEAL:
                peer = render_reveal(base_url, deck_path, src, out / "peer")
            else:
                peer = render_slidev(args.slidev, FIDELITY / deck.source, out / "peer")
            r = DeckResult(
                deck.name,
                deck.convention.value,
                PEER_NAMES[deck.convention],
                TARGETS[deck.convention],
                dy,
                peer,
            )
            if dy.pngs or peer.pngs:
                compare_deck(r, args.work)
            result.decks.append(r)
            print(row(r), f"({dy.seconds:.0f} s / {peer.seconds:.0f} s)", flush=True)
    result.minutes = (time.monotonic() - t0) / 60
    (args.work / "results.json").write_text(
        json.dumps(summary(result), indent=2, ensure_ascii=False), encoding="utf-8"
    )
    section = markdown(result)
    print(section)
    if args.write_docs:
        write_docs(section)


if __name__ == "__main__":
    main()
