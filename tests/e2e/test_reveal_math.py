"""A reveal.js deck with the Math plugin through `deckyard render`: no CDN, math typeset.

The plugin loaded KaTeX (or MathJax) from cdn.jsdelivr.net, which a render cannot reach, so
every slide failed (blocked request, then the plugin's rejected load as a page exception).
KaTeX now comes from `vendor/js`; MathJax is not vendored, so its slides show TeX source.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import DECKYARD, clean_env
from tests.helpers.reveal import ROOT, reveal_deck

MATH_FIXTURE = ROOT / "tests" / "fixtures" / "reveal_math"


def render(tmp_path: Path, name: str, plugin: str) -> tuple[str, list[bytes]]:
    """Render the math fixture with `plugin`; the CLI's output and each page's PNG."""
    folder = reveal_deck(tmp_path / name, MATH_FIXTURE)
    index = folder / "index.html"
    index.write_text(index.read_text().replace("RevealMath.KaTeX", plugin))
    out = tmp_path / f"{name}-out"
    done = subprocess.run(
        [*DECKYARD, "render", str(folder), "--out", str(out), "--format", "png"],
        env=clean_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = " ".join((done.stdout + done.stderr).split())  # rich wraps long lines
    assert done.returncode == 0, output
    assert "RENDER_REQUEST_BLOCKED" not in output and "cdn.jsdelivr.net" not in output
    assert "RENDER_PAGE_EXCEPTION" not in output
    manifest = json.loads((out / "deckyard-manifest.json").read_text())
    assert [p["status"] for p in manifest["pages"]] == ["passed", "passed"]
    return output, [(out / p["png"]).read_bytes() for p in manifest["pages"]]


@pytest.mark.chromium
@pytest.mark.processes
def test_katex_math_renders_from_the_vendored_copy_and_mathjax_shows_its_source(
    tmp_path: Path,
) -> None:
    katex_output, katex = render(tmp_path, "katex", "RevealMath.KaTeX")
    mathjax_output, mathjax = render(tmp_path, "mathjax", "RevealMath.MathJax3")
    assert "not vendored" not in katex_output
    assert "MathJax is not vendored; math shows as TeX source" in mathjax_output
    # The slide without math is the same either way; the one with math is not: KaTeX typeset
    # what MathJax's (inert) plugin left as TeX source.
    assert katex[1] == mathjax[1]
    assert katex[0] != mathjax[0]
