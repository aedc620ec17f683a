"""The import graph has layers and no circles: the services never import the command line, the report
package imports neither, and no module imports (at any depth, at module or function level) one that
imports it back. Read from the source with ``ast``: nothing is imported to check it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mqctl", "services", "spark_reports")
#: layer -> the top-level packages it may not import
FORBIDDEN = {"services": {"mqctl"}, "spark_reports": {"mqctl", "services"}}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def imported(path: Path, name: str, known: set[str]) -> Iterator[str]:
    """Every project module ``path`` imports (``from a.b import c`` is a.b.c when that is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:`` (type-only imports never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: set(imported(path, name, known)) for name, path in found.items()}


def test_no_import_goes_back_up_a_layer() -> None:
    wrong = sorted(f"{a} imports {b}" for a, deps in graph().items() for b in deps
                   if b.split(".")[0] in FORBIDDEN.get(a.split(".")[0], set()))
    assert wrong == []


def test_no_module_imports_itself_through_others() -> None:
    edges = graph()
    cycles: set[tuple[str, ...]] = set()

    def visit(node: str, path: list[str], on_path: set[str], done: set[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt in on_path:
                cycle = path[path.index(nxt):]
                start = cycle.index(min(cycle))
                cycles.add(tuple(cycle[start:] + cycle[:start]))
            elif nxt not in done:
                on_path.add(nxt)
                visit(nxt, [*path, nxt], on_path, done)
                on_path.discard(nxt)
        done.add(node)

    done: set[str] = set()
    for start in sorted(edges):
        if start not in done:
            visit(start, [start], {start}, done)
    assert sorted(" -> ".join(c) for c in cycles) == []


def test_every_product_function_fits_on_a_screen() -> None:
    """At most 60 lines a function (docstring included): a longer one does more than one thing."""
    long = []
    for top in ("mqctl", "services", "spark_reports"):
        for path in (ROOT / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > 60:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, long
