"""How `scripts/check` spreads the suite over two pytest-xdist workers.

Tests that start browsers or processes, and every drill and end-to-end test, run one after
another on one worker, as in a plain run: their bounds (lease expiry, deadlines, settle times)
assume they do not share the machine with each other. The storage and unit tests spread over
both workers beside them, one test at a time.

The choice is made per module, on the controller, which sees node ids only (pytest-xdist's own
`xdist_group` marker cannot be used: it rewrites `item._nodeid`, which pytest 9 no longer
reads). A module belongs to the serial group when it lives under `tests/drills/` or
`tests/e2e/`, or when its source applies one of the `chromium`, `processes` or `slow` marks.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

SERIAL = "processes"
SERIAL_DIRS = {"drills", "e2e"}
MARKS = re.compile(r"\bmark\.(chromium|processes|slow)\b")


@functools.cache
def serial_module(root: Path, module: str) -> bool:
    """Whether the test module at `module` (relative to `root`) runs in the serial group."""
    parts = Path(module).parts
    if len(parts) > 1 and parts[0] == "tests" and parts[1] in SERIAL_DIRS:
        return True
    try:
        return MARKS.search((root / module).read_text(encoding="utf-8")) is not None
    except OSError:
        return True


class SerialProcessTests(LoadScopeScheduling):
    """Load scheduling test by test, except one work unit for every serial module's tests."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return SERIAL if serial_module(self.config.rootpath, module) else nodeid
