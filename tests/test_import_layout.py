"""The import graph of the five packages points one way: ``benchmarks -> harness -> simulators``.

Every module's imports are read with ``ast`` (module level and inside functions alike; a lazy import is still a
dependency), except those under ``if __name__ == "__main__":``, which belong to the script a module can be run
as, not to the module. The test fails on

- an import cycle between modules of these packages;
- a simulator (``fractal_sim``, ``agentfly_sim``, ``tortoise_sim``) importing ``harness``, ``benchmarks`` or another
  simulator;
- ``harness`` importing ``benchmarks`` anywhere but the CLI's bench commands (``harness.cli.bench_*``, which import
  each benchmark inside its command);
- the hook entry (``harness.cli.entry``) importing anything at module level beyond the standard library, or the
  CLI package's ``__init__`` importing anything (the hook path must stay free of typer).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SIMULATORS = ("fractal_sim", "agentfly_sim", "tortoise_sim")
PACKAGES = (*SIMULATORS, "harness", "benchmarks")
LEVEL = {"fractal_sim": 0, "agentfly_sim": 0, "tortoise_sim": 0, "harness": 1, "benchmarks": 2}
UPWARD_ALLOWED = {"harness.cli.bench_run", "harness.cli.bench_measures", "harness.cli.bench_workloads"}
"""Modules allowed to import a higher layer: the CLI's bench commands run the benchmarks (lazily)."""
KNOWN_CYCLES: list[set[str]] = []
"""Cycles owned by another change in progress; each entry must still be a cycle (a stale entry fails)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of the five packages (results folders hold no code)."""
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "results" not in path.relative_to(ROOT).parts:
                found[_module_name(path)] = path
    return found


def _is_main_guard(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__" and any(isinstance(c, ast.Constant) and c.value == "__main__"
                                                   for c in test.comparators))


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, bool]]:
    """``(imported name, at module level)`` for every import outside a ``__main__`` guard; relative imports are
    resolved against ``module``; ``from a import b`` yields ``a.b`` (a submodule or a name in ``a``)."""
    out: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        if _is_main_guard(node):
            return
        if isinstance(node, ast.Import):
            out.extend((a.name, top) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            out.extend((f"{base}.{a.name}", top) for a in node.names)
        in_body = top and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, in_body)

    visit(tree, True)
    return out


def import_graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, bool]]]]:
    """Edges between modules of the five packages, and every module's raw imports."""
    mods = modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    raw: dict[str, list[tuple[str, bool]]] = {}
    for name, path in mods.items():
        raw[name] = _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), name,
                             path.name == "__init__.py")
        edges[name] = {t for imp, _ in raw[name] if (t := resolve(imp)) and t != name}
    return edges, raw


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, bool]]]]:
    return import_graph()


def test_the_scan_sees_the_packages(graph):
    """The checks below only mean something if the scan finds modules and edges where they certainly are."""
    edges, _ = graph
    assert {m.split(".")[0] for m in edges} == set(PACKAGES)
    assert "harness.cli.main" in edges["harness.cli.entry"]  # lazy (inside main) but still an edge
    assert any(t.startswith("benchmarks.") for t in edges["harness.cli.bench_measures"])


def test_the_cycle_finder_finds_a_planted_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [{"a", "b", "c"}]


def test_no_import_cycles(graph):
    edges, _ = graph
    found = cycles(edges)
    unknown = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    stale = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert not unknown, f"import cycles: {unknown}"
    assert not stale, f"these known cycles are gone; remove them from KNOWN_CYCLES: {stale}"


def test_imports_point_down(graph):
    edges, _ = graph
    bad = []
    for module, targets in sorted(edges.items()):
        pkg = module.split(".")[0]
        for target in sorted(targets):
            other = target.split(".")[0]
            if other == pkg:
                continue
            if LEVEL[other] > LEVEL[pkg] and module not in UPWARD_ALLOWED:
                bad.append(f"{module} -> {target} (upward)")
            elif LEVEL[other] == LEVEL[pkg]:
                bad.append(f"{module} -> {target} (one simulator importing another)")
    assert not bad, "\n".join(bad)


def test_the_hook_path_stays_light(graph):
    """``harness.cli.entry`` dispatches hook commands before typer loads: at module level it imports only the
    standard library (and ``harness``'s own offline-environment setup), and ``harness.cli``'s ``__init__``
    imports nothing."""
    _, raw = graph
    assert [name for name, _ in raw["harness.cli"]] == []
    top = {name.split(".")[0] for name, at_top in raw["harness.cli.entry"] if at_top}
    assert top <= set(sys.stdlib_module_names) | {"__future__"}, top
    assert not [name for name, _ in raw["harness"] if name.split(".")[0] not in sys.stdlib_module_names]
