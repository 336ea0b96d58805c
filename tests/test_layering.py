"""The package's shape, read from the source (AST, lazy imports inside functions included): the
stages import only downward, no two modules import each other round a circle, only `cli/` imports the
UI libraries, and SQL lives in `catalog/`. docs/architecture.md describes the stages."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rewind"

# The stages, lowest first. A module may import its own stage and the ones below it. The top-level
# modules are leaves (constants, errors, clock, ...), except the three named here.
STAGES = {"store": 1, "catalog": 1, "capture": 2, "hooks": 3, "watch": 4, "history": 5, "cli": 6}
TOP_LEVEL = {
    "rewind.project": 1.5,   # the Project handle opens the store and the catalog; every stage above uses it
    "rewind.hook": 9,        # the installed hook's entry point
    "rewind.__main__": 9,    # `python -m rewind`
}
UI_LIBRARIES = ("typer", "rich", "textual")
KNOWN_CIRCLES: list[list[str]] = []


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _stage(module: str) -> float:
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in STAGES):
        return STAGES[parts[1]]
    return TOP_LEVEL.get(module, 0)


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> tuple[set[str], set[str]]:
    """The rewind modules `module` imports, and the top-level names of everything it imports."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    ours, names = set(), set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.name.split(".")[0])
                if alias.name.startswith("rewind"):
                    ours.add(_resolve(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target.split(".")[0])
            if target.startswith("rewind"):
                for alias in node.names:
                    ours.add(_resolve(f"{target}.{alias.name}"))
    ours.discard(None)
    ours.discard(module)
    return ours, names


GRAPH = {module: _imports(module)[0] for module in MODULES}


def test_the_stage_table_knows_every_package():
    packages = {m.split(".")[1] for m in MODULES if m.count(".") >= 1 and (PACKAGE / m.split(".")[1]).is_dir()}
    assert packages <= set(STAGES), packages - set(STAGES)
    assert set(TOP_LEVEL) <= set(MODULES)


def test_no_stage_imports_a_higher_one():
    upward = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() for t in targets if _stage(t) > _stage(m))
    assert upward == []


def test_no_import_circle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:     # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert circles == KNOWN_CIRCLES


def test_the_checker_sees_an_upward_and_a_circular_import():
    """The checks above would pass on an empty graph; this one shows they read real imports."""
    assert "rewind.catalog.db" in GRAPH["rewind.project"]
    assert _stage("rewind.cli.app") > _stage("rewind.history.restore") > _stage("rewind.capture.scan")
    assert any(t.startswith("rewind.hooks.") for t in GRAPH["rewind.hook"])


def test_only_the_cli_imports_the_ui_libraries():
    outside = sorted(f"{m} imports {lib}" for m in MODULES if not m.startswith("rewind.cli")
                     for lib in UI_LIBRARIES if lib in _imports(m)[1])
    assert outside == []


def test_sql_lives_in_the_catalog():
    outside = sorted(str(p.relative_to(PACKAGE.parent)) for m, p in MODULES.items()
                     if not m.startswith("rewind.catalog") and ".execute(" in p.read_text())
    assert outside == []
