"""`deckyard doctor`: checks Chromium, the Noto fonts and the database, and says what to fix."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from deckyard.cli.common import load_settings

if TYPE_CHECKING:
    from deckyard.config import Settings

FONT_PACKAGES = {
    "fonts-noto-core": ("NotoSans-Regular.ttf", "NotoSerif-Regular.ttf"),
    "fonts-noto-cjk": ("NotoSansCJK-Regular.ttc", "NotoSerifCJK-Regular.ttc"),
    "fonts-noto-color-emoji": ("NotoColorEmoji.ttf",),
}
FONT_DIRS = (Path("/usr/share/fonts"), Path("/usr/local/share/fonts"), Path.home() / ".fonts")
DEBIAN_CHROMIUM = Path("/usr/bin/chromium")
PROBE_TIMEOUT_SECONDS = 20.0


@dataclass
class Check:
    """One line of the report: what was checked, whether it is fine, and what to do if not."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""


def check_chromium(settings: Settings) -> Check:
    """Find the Chromium the renderer would launch and ask it for its version."""
    path = settings.chromium_path or (DEBIAN_CHROMIUM if DEBIAN_CHROMIUM.exists() else None)
    if path is None or not path.is_file():
        return Check(
            "chromium",
            False,
            f"not found ({path or '/usr/bin/chromium'})",
            "apt-get install chromium, or set DECKYARD_CHROMIUM_PATH",
        )
    try:
        out = subprocess.run(
            [str(path), "--version"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("chromium", False, f"{path} does not run: {exc}", "reinstall chromium")
    return Check("chromium", True, f"{path}: {out}")


def _font_files() -> set[str]:
    names: set[str] = set()
    fc_list = shutil.which("fc-list")
    if fc_list:
        try:
            out = subprocess.run(
                [fc_list, "--format", "%{file}\n"],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_SECONDS,
            ).stdout
            names.update(Path(line).name for line in out.splitlines() if line)
        except (OSError, subprocess.SubprocessError):
            pass
    for root in FONT_DIRS:
        if root.is_dir():
            names.update(p.name for p in root.rglob("*") if p.suffix in (".ttf", ".ttc", ".otf"))
    return names


def check_fonts() -> list[Check]:
    """Whether each Noto package's signature font file is installed."""
    present = _font_files()
    checks = []
    for package, files in FONT_PACKAGES.items():
        found = [f for f in files if f in present]
        if found:
            checks.append(Check(package, True, ", ".join(found)))
        else:
            checks.append(
                Check(
                    package,
                    False,
                    "not installed; pages fall back to boxes (tofu) for these glyphs",
                    f"apt-get install {package}",
                )
            )
    return checks


def check_database(settings: Settings) -> Check:
    """Reach the database and compare its migration revision with this version's head."""
    from deckyard.db.migrate import database_status

    url = settings.resolved_database_url
    try:
        current, head = asyncio.run(database_status(url))
    except Exception as exc:
        return Check(
            "database",
            False,
            f"unreachable: {str(exc).splitlines()[0]}",
            "check DECKYARD_DATABASE_URL and that the database is running",
        )
    if current != head:
        state = "empty" if current is None else f"at {current}"
        return Check(
            "database", False, f"reachable but {state}, head is {head}", "run: deckyard migrate"
        )
    return Check("database", True, f"reachable, migrations at head ({head})")


def check_renderers(settings: Settings) -> list[Check]:
    """Ask each configured renderer who it is (a signed call); in Lite, say what serve runs."""
    if not settings.renderer_urls:
        if settings.renderers == 0:
            return [
                Check(
                    "renderers",
                    False,
                    "none: DECKYARD_RENDERERS=0 and no DECKYARD_RENDERER_URLS, so screenshots "
                    "and validation will answer 'unavailable'",
                    "set DECKYARD_RENDERERS=1 (Lite) or list renderers in DECKYARD_RENDERER_URLS",
                )
            ]
        return [
            Check(
                "renderers",
                True,
                f"Lite: deckyard serve supervises {settings.renderers} local renderer(s)",
            )
        ]
    if not settings.renderer_secret:
        return [
            Check(
                "renderers",
                False,
                "DECKYARD_RENDERER_URLS is set but DECKYARD_RENDERER_SECRET is not",
                "set DECKYARD_RENDERER_SECRET to the renderers' shared secret",
            )
        ]
    import httpx  # lazily: usage errors and --help stay fast

    from deckyard.render.protocol import HmacAuth

    checks = []
    auth = HmacAuth(settings.renderer_secret)
    for url in settings.renderer_urls:
        name = f"renderer {url}"
        try:
            resp = httpx.get(f"{url.rstrip('/')}/v1/capabilities", auth=auth, timeout=5)
        except httpx.HTTPError as exc:
            checks.append(Check(name, False, f"unreachable: {exc}", "start it, or fix the URL"))
            continue
        if resp.status_code == 401:
            checks.append(
                Check(name, False, "refused our signature", "use the renderer's shared secret")
            )
        elif resp.status_code != 200:
            checks.append(Check(name, False, f"answered {resp.status_code}", "see its log"))
        else:
            caps = resp.json()
            checks.append(
                Check(
                    name,
                    True,
                    f"{caps.get('slots')} slot(s), epoch {caps.get('epoch')}, "
                    f"{caps.get('browser_version', 'browser ?')}",
                )
            )
    return checks


def run_doctor(settings: Settings) -> int:
    """Print every check with what to do about problems; 0 when all fine, else 1."""
    checks = [
        check_chromium(settings),
        *check_fonts(),
        check_database(settings),
        *check_renderers(settings),
    ]
    for check in checks:
        mark = {True: "ok", False: "PROBLEM", None: "skipped"}[check.ok]
        print(f"{mark:8} {check.name}: {check.detail}")
        if check.fix:
            print(f"         fix: {check.fix}")
    return 1 if any(c.ok is False for c in checks) else 0


def doctor() -> None:
    """Check Chromium, fonts, the database and renderers, and say what to do about each."""
    raise typer.Exit(run_doctor(load_settings()))
