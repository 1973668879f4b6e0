"""The documentation under docs/: builds with ``mkdocs build --strict``, claim lists in sync with the registry,
every named option of the config classes documented, nothing (in the pages or the docstrings the API pages
render) that points at a folder or machine a user does not have."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import docgen
from harness.claims import all_claims

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_claim_pages_in_sync_with_registry() -> None:
    stale = docgen.stale_pages(DOCS)
    assert not stale, f"claims block out of date in {stale}; run python -m harness.docgen"


def test_every_claim_has_its_anchor_on_its_design_page() -> None:
    for design, page in docgen.PAGES.items():
        text = (DOCS / page).read_text(encoding="utf-8")
        for c in all_claims(design=design):
            assert f'<a id="{c.id.lower()}"></a>' in text, (c.id, page)


def test_docgen_check_fails_on_a_stale_page(tmp_path: Path) -> None:
    for page in docgen.PAGES.values():
        (tmp_path / page).write_text((DOCS / page).read_text(encoding="utf-8"), encoding="utf-8")
    assert docgen.main(["--check", "--docs", str(tmp_path)]) == 0
    p = tmp_path / "tortoise.md"
    p.write_text(p.read_text(encoding="utf-8").replace('<a id="tor-15"></a>', ""), encoding="utf-8")
    assert docgen.main(["--check", "--docs", str(tmp_path)]) == 1
    assert docgen.main(["--docs", str(tmp_path)]) == 0 and docgen.stale_pages(tmp_path) == []


@pytest.mark.parametrize(("module", "cls", "page"), [
    ("tortoise_sim.config", "SimConfig", "tortoise.md"),
    ("agentfly_sim.driver", "DriverConfig", "agentfly.md"),
    ("agentfly_sim.training", "TrainConfig", "agentfly.md"),
])
def test_every_named_option_is_documented(module: str, cls: str, page: str) -> None:
    config = getattr(importlib.import_module(module), cls)
    text = (DOCS / page).read_text(encoding="utf-8")
    missing = [f.name for f in dataclasses.fields(config) if f"`{f.name}`" not in text]
    assert not missing, f"{cls} fields not documented in docs/{page}: {missing}"


PRIVATE = re.compile(r"\.\./shared|\bshared/(spec|reports|data|DESIGN)|/work/|heavy\.lock|memsim-heavy|flock /tmp")
"""What a user of memsim does not have: this project's shared folder, its machines' paths and heavy-run lock."""


def test_docs_do_not_send_users_to_shared() -> None:
    for p in [*DOCS.rglob("*.md"), ROOT / "README.md", ROOT / "CONTRIBUTING.md"]:
        m = PRIVATE.search(p.read_text(encoding="utf-8"))
        assert not m, (p, m.group(0))


def _api_modules() -> list[str]:
    """The modules the API pages render (``::: module`` lines of docs/api/*.md)."""
    return [m for p in sorted((DOCS / "api").glob("*.md"))
            for m in re.findall(r"^:::\s*([\w.]+)", p.read_text(encoding="utf-8"), re.M)]


def _docstrings(path: Path) -> list[tuple[int, str]]:
    """Every docstring the API pages can render from a module: module, class, function and attribute docstrings
    (each string literal standing alone as a statement, which is what mkdocstrings/griffe shows)."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.lineno, node.value.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)]


def test_api_pages_do_not_send_users_to_shared() -> None:
    modules = _api_modules()
    assert {"tortoise_sim.config", "harness.claims", "benchmarks.sweep"} <= set(modules)
    bad = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, name
        for line, text in _docstrings(Path(spec.origin)):
            m = PRIVATE.search(text)
            if m:
                bad.append(f"{name}:{line}: {m.group(0)}")
    assert not bad, bad


def test_api_docstring_scan_sees_attribute_docstrings(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text('"""Module."""\nX = 1\n"""Data in ../shared/data/x."""\n', encoding="utf-8")
    assert [PRIVATE.search(t) is not None for _, t in _docstrings(src)] == [False, True]


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("mkdocs / mkdocstrings not installed (pip install -e '.[docs]')")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
                          "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    html = (tmp_path / "site" / "tortoise" / "index.html").read_text(encoding="utf-8")
    assert 'id="tor-15"' in html
    api = (tmp_path / "site" / "api" / "tortoise" / "index.html").read_text(encoding="utf-8")
    assert "SimConfig" in api  # the API pages are rendered from the docstrings


def test_fractal_runtime_options_are_documented() -> None:
    import inspect

    from fractal_sim import FractalRuntime

    text = (DOCS / "fractal.md").read_text(encoding="utf-8")
    params = [p.name for p in inspect.signature(FractalRuntime.__init__).parameters.values()
              if p.name not in ("self", "workspace_path", "session", "agent")]
    missing = [p for p in params if f"`{p}`" not in text]
    assert params and not missing, missing
