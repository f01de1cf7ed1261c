"""Rule Q0's guard: one `is_validation_passed`, and nobody else decides a pass by status text.

Checked on the syntax tree of `src/deckyard`: exactly one definition of `is_validation_passed`
(no private copies such as `_is_validation_passed`), and outside that function no comparison of
something named like a status with `"passed"` or `StageStatus.PASSED`/`ValidationStatus.PASSED`.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[4] / "src" / "deckyard"
PREDICATE = "is_validation_passed"
PASSED_ENUMS = {"StageStatus", "ValidationStatus"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (p.relative_to(SRC).as_posix(), ast.parse(p.read_text(encoding="utf-8"), str(p)))
        for p in sorted(SRC.rglob("*.py"))
    ]


def _is_passed_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value == "passed"
    if isinstance(node, ast.Attribute) and node.attr == "PASSED":
        return isinstance(node.value, ast.Name) and node.value.id in PASSED_ENUMS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_passed_literal(e) for e in node.elts)
    return False


def _mentions_status(node: ast.expr) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and "status" in sub.id.lower():
            return True
        if isinstance(sub, ast.Attribute) and "status" in sub.attr.lower():
            return True
        if isinstance(sub, ast.Constant) and sub.value == "status":
            return True
        if isinstance(sub, ast.Name) and sub.id in ("result", "validation"):
            return True
    return False


class _PassComparisons(ast.NodeVisitor):
    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.inside_predicate = 0
        self.found: list[str] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.inside_predicate += node.name == PREDICATE
        self.generic_visit(node)
        self.inside_predicate -= node.name == PREDICATE

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        decides = any(
            isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn | ast.Is | ast.IsNot)
            for op in node.ops
        )
        if (
            not self.inside_predicate
            and decides
            and any(_is_passed_literal(o) for o in operands)
            and any(_mentions_status(o) for o in operands if not _is_passed_literal(o))
        ):
            self.found.append(f"{self.rel}:{node.lineno}: {ast.unparse(node)}")
        self.generic_visit(node)


def test_is_validation_passed_is_defined_exactly_once() -> None:
    definitions = [
        f"{rel}:{node.lineno}"
        for rel, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.lstrip("_") == PREDICATE
    ]
    assert definitions == ["decks/validation/rules.py:" + definitions[0].split(":")[1]]


def test_nothing_else_compares_a_validation_status_with_passed() -> None:
    offenders: list[str] = []
    for rel, tree in _modules():
        visitor = _PassComparisons(rel)
        visitor.visit(tree)
        offenders += visitor.found
    assert offenders == []


def test_the_check_would_catch_a_second_decider() -> None:
    sneaky = ast.parse(
        "def gate(result):\n"
        "    return result['status'] == 'passed'\n"
        "def gate2(v):\n"
        "    return v.stages.render.status in (StageStatus.PASSED, StageStatus.WARNING)\n"
    )
    visitor = _PassComparisons("sneaky.py")
    visitor.visit(sneaky)
    assert len(visitor.found) == 2
