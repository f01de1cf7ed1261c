"""Architecture rules checked on the syntax tree of `src/deckyard` (never on comment text)."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import DateTime

import deckyard.migrations.models  # noqa: F401
from deckyard.db import UTCDateTime, metadata

SRC = Path(__file__).resolve().parents[2] / "src" / "deckyard"
DRIVERS = {"sqlite3", "aiosqlite", "psycopg", "psycopg_pool", "asyncpg"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (p.relative_to(SRC).as_posix(), ast.parse(p.read_text(), str(p)))
        for p in sorted(SRC.rglob("*.py"))
    ]


def _in_db(rel: str) -> bool:
    return rel.startswith("db/")


def test_only_the_db_package_imports_drivers() -> None:
    offenders = []
    for rel, tree in _modules():
        if _in_db(rel):
            continue
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{rel}: {n}" for n in names if n.split(".")[0] in DRIVERS]
    assert offenders == []


def test_only_db_and_migration_helpers_ask_for_the_dialect() -> None:
    offenders = []
    for rel, tree in _modules():
        if _in_db(rel) or rel == "migrations/helpers.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                if node.attr == "driver_connection":
                    offenders.append(f"{rel}:{node.lineno} driver_connection")
                base = node.value
                base_name = getattr(base, "attr", getattr(base, "id", ""))
                if node.attr == "name" and base_name == "dialect":
                    offenders.append(f"{rel}:{node.lineno} dialect.name")
            if isinstance(node, ast.keyword) and node.arg in ("sqlite_where", "postgresql_where"):
                offenders.append(f"{rel}:{node.value.lineno} {node.arg}")
    assert offenders == []


def test_transient_conflict_check_is_defined_once() -> None:
    defs = [
        rel
        for rel, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name == "is_transient_write_conflict"
    ]
    assert defs == ["db/errors.py"]


def test_no_model_column_uses_a_bare_datetime() -> None:
    bare = [
        f"{t.name}.{c.name}"
        for t in metadata.sorted_tables
        for c in t.columns
        if isinstance(c.type, DateTime) and not isinstance(c.type, UTCDateTime)
    ]
    assert bare == []
    assert any(isinstance(c.type, UTCDateTime) for t in metadata.sorted_tables for c in t.columns)


# --- the layering ------------------------------------------------------------------------------
#
# Every import of a deckyard module (at module level, inside a function, or under
# `if TYPE_CHECKING:`) is mapped to its component and checked against the declared graph of
# DESIGN.md §1 and §9. Cycles are looked for between modules over the imports that run (module
# and function level); a `TYPE_CHECKING` import never runs, so it counts for layering only.

# A module's component: the longest listed prefix of its dotted name (without `deckyard.`).
COMPONENTS: dict[str, str] = {
    "": "version",
    "__main__": "cli",
    "config": "config",
    "clock": "clock",
    "loop": "loop",
    "db": "db",
    "migrations": "migrations",
    "jobs": "jobs",
    "tasks": "tasks",
    "render": "render.protocol",
    "render.protocol": "render.protocol",
    "render.errors": "render.protocol",
    "render.processes": "render.processes",
    "render.control": "render.control",
    "render.renderer": "renderer",
    "artifacts": "artifacts",
    "decks": "decks",
    "outputs": "outputs",
    "ai": "ai",
    "external": "external",
    "webhooks": "webhooks",
    "workspaces": "workspaces",
    "node": "node",
    "render_node": "node",
    "api": "api",
    "cli": "cli",
}

# Anything may import these.
BASE = {"version", "config", "clock"}
BELOW_NODE = {
    "loop",
    "db",
    "migrations",
    "jobs",
    "tasks",
    "render.protocol",
    "render.processes",
    "render.control",
    "renderer",
    "artifacts",
    "decks",
    "outputs",
    "ai",
    "external",
    "webhooks",
    "workspaces",
}
# What each component may import besides itself and BASE.
ALLOWED: dict[str, set[str]] = {
    "version": set(),
    "config": set(),
    "clock": set(),
    "db": set(),
    # A Loop waits on a `db.Subscription` (wakeups) and labels its SQL through `db.current_loop`.
    "loop": {"db"},
    # The migrations read every package's table definitions.
    "migrations": {
        "db",
        "jobs",
        "tasks",
        "render.control",
        "decks",
        "ai",
        "webhooks",
        "workspaces",
    },
    "jobs": {"db", "loop"},
    "tasks": {"jobs", "db", "loop", "webhooks"},
    # Webhooks sit between the job runtime and its users: tasks and decks announce their events
    # in their own transactions; deliveries pass the renderer's SSRF guard.
    "webhooks": {"jobs", "db", "loop", "renderer", "render.protocol"},
    "render.protocol": set(),
    # Process hygiene (subreaper, kill by tag) that the renderer and its supervisor share.
    "render.processes": set(),
    "render.control": {"jobs", "db", "loop", "render.protocol", "render.processes", "artifacts"},
    "renderer": {"render.protocol", "render.processes"},
    "artifacts": set(),
    # Output formats build files from what the deck jobs rendered; they import no deck code.
    "outputs": set(),
    "decks": {
        "outputs",
        "jobs",
        "tasks",
        "render.control",
        "render.protocol",
        "artifacts",
        "db",
        "loop",
        "webhooks",
    },
    "ai": {"decks", "jobs", "db", "loop"},
    # The external-worker protocol claims and finishes through `Runtime.fenced`; no AI in it.
    "external": {"jobs"},
    # Workspaces, API tokens, idempotency keys and the audit log: tables and their store.
    "workspaces": {"db"},
    "node": BELOW_NODE,
    "api": BELOW_NODE | {"node"},
    "cli": BELOW_NODE | {"node", "api"},
}

# Imports that break the rules above and are known, each with the issue that removes it; an
# entry is (importing module, imported module), both without `deckyard.`. Keep it short.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()

# Packages whose table definitions (`<pkg>.schema`) only their store modules (`<pkg>.store`,
# `<pkg>.store_*`) and the migrations import.
STORE_PACKAGES = ("jobs", "tasks", "render.control", "decks", "ai", "webhooks", "workspaces")


@dataclass(frozen=True)
class Edge:
    """One import of a deckyard module by another."""

    source: str
    target: str
    line: int
    runs: bool  # False under `if TYPE_CHECKING:`

    def __str__(self) -> str:
        return f"deckyard.{self.source}:{self.line} imports deckyard.{self.target}"


def _module_paths() -> dict[str, Path]:
    names = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _edges() -> list[Edge]:
    """Every import of a deckyard module in src/deckyard, wherever it stands in the file."""
    paths = _module_paths()
    edges: dict[Edge, None] = {}
    for source, path in paths.items():
        tree = ast.parse(path.read_text(), str(path))
        typing_only = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                assert node.level == 0, f"{path}:{node.lineno}: use an absolute import"
                module = node.module or ""
                # `from deckyard.x import y` imports the module deckyard.x.y when there is one.
                targets = [
                    sub if (sub := f"{module}.{a.name}").partition(".")[2] in paths else module
                    for a in node.names
                ]
            for target in targets:
                if target == "deckyard" or target.startswith("deckyard."):
                    short, runs = target.partition(".")[2], node.lineno not in typing_only
                    edges[Edge(source, short, node.lineno, runs)] = None
    return list(edges)


def _component(module: str) -> str:
    parts = module.split(".") if module else []
    for n in range(len(parts), -1, -1):
        prefix = ".".join(parts[:n])
        if prefix in COMPONENTS:
            return COMPONENTS[prefix]
    raise AssertionError(f"deckyard.{module} belongs to no declared component")


def test_every_module_belongs_to_a_declared_component() -> None:
    assert {_component(m) for m in _module_paths()} <= set(ALLOWED)


def test_known_exceptions_are_still_needed() -> None:
    stale = KNOWN_EXCEPTIONS - {(e.source, e.target) for e in _edges()}
    assert not stale, f"these imports are gone, remove them from KNOWN_EXCEPTIONS: {stale}"


def test_every_import_follows_the_declared_layering() -> None:
    undeclared = []
    for edge in _edges():
        mine, theirs = _component(edge.source), _component(edge.target)
        if theirs == mine or theirs in BASE or theirs in ALLOWED[mine]:
            continue
        if (edge.source, edge.target) not in KNOWN_EXCEPTIONS:
            undeclared.append(f"{edge} ({mine} -> {theirs} is not declared)")
    assert not undeclared, "undeclared imports:\n" + "\n".join(undeclared)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected set of more than one module, or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_reports_each_cycle_once() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"a"}}) == [["a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for edge in _edges():
        if edge.runs:
            graph.setdefault(edge.source, set()).add(edge.target)
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_table_definitions_are_imported_only_by_their_store() -> None:
    offenders = []
    for edge in _edges():
        for pkg in STORE_PACKAGES:
            if edge.target != f"{pkg}.schema":
                continue
            store = edge.source == f"{pkg}.store" or edge.source.startswith(f"{pkg}.store_")
            known = (edge.source, edge.target) in KNOWN_EXCEPTIONS
            if not (store or known or edge.source.startswith("migrations.")):
                offenders.append(str(edge))
    assert not offenders, "table definitions imported outside their store:\n" + "\n".join(offenders)


def test_tables_are_defined_only_in_schema_modules() -> None:
    """A table defined elsewhere would slip past the store rule above, which reads `schema`."""
    offenders = []
    for rel, tree in _modules():
        imports_table = any(
            isinstance(node, ast.ImportFrom)
            and node.module == "sqlalchemy"
            and any(a.name == "Table" for a in node.names)
            for node in ast.walk(tree)
        )
        defines = any(
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "Table"
            for node in ast.walk(tree)
        )
        if imports_table and defines and not rel.endswith("/schema.py"):
            offenders.append(rel)
    assert offenders == [], f"sqlalchemy tables defined outside a schema module: {offenders}"


# Packages that others use only through their public API: the package itself (its `__init__`)
# and the modules listed. `jobs.status` is the lifecycle vocabulary tasks and render requests
# share; the migrations read table definitions and are checked above instead.
PUBLIC_API: dict[str, set[str]] = {"jobs": {"jobs", "jobs.status"}}


def test_other_packages_use_only_a_packages_public_api() -> None:
    offenders = []
    for edge in _edges():
        for pkg, public in PUBLIC_API.items():
            inside = edge.source == pkg or edge.source.startswith(f"{pkg}.")
            reaches = edge.target == pkg or edge.target.startswith(f"{pkg}.")
            if not reaches or inside or edge.source.startswith("migrations."):
                continue
            if edge.target not in public and (edge.source, edge.target) not in KNOWN_EXCEPTIONS:
                offenders.append(f"{edge} (use deckyard.{pkg}'s public API)")
    assert not offenders, "imports past a package's public API:\n" + "\n".join(offenders)


# Components whose writes go through `Database.write` (retried on SQLite BUSY and PostgreSQL
# 40001/40P01), never a bare `write_transaction()`: the API and its tables' store, decks and AI.
RETRIED_WRITERS = {"api", "workspaces", "decks", "ai"}


def test_api_decks_and_ai_write_through_the_retrying_write() -> None:
    offenders = [
        f"{rel}:{node.lineno}"
        for rel, tree in _modules()
        if _component(rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__"))
        in RETRIED_WRITERS
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "write_transaction"
    ]
    assert not offenders, "use Database.write(fn) instead of write_transaction():\n" + "\n".join(
        offenders
    )


# What `deckyard render` and `validate` never load: the services `Node` adds to the render
# pipeline (`render_node.RenderNode`), which a render uses none of (issue 31's file count).
NOT_RENDERED = ("node", "ai", "external", "decks.retention", "webhooks.service", "webhooks.relay")


def test_a_render_loads_none_of_the_services_it_does_not_use() -> None:
    """Importing the CLI's pipeline (everything a run imports before it starts) loads the render
    node and the deck service, and none of `NOT_RENDERED`."""
    probe = (
        "import sys, deckyard.cli.pipeline; "
        "print('\\n'.join(m for m in sys.modules if m.startswith('deckyard.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = {line.removeprefix("deckyard.") for line in done.stdout.split()}
    assert {"render_node", "decks.service"} <= loaded  # the probe did load the pipeline
    offenders = sorted(
        m for m in loaded if any(m == n or m.startswith(f"{n}.") for n in NOT_RENDERED)
    )
    assert not offenders, f"deckyard render loads: {offenders}"
