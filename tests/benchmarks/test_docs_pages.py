"""Every results page of the docs, its figures, the Results nav of mkdocs.yml and the README's headline block equal
their render from the committed results JSON (one source for every published number)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import docs_pages
from benchmarks.common import RESULTS_DIR


def test_every_generated_file_matches_its_render() -> None:
    files = docs_pages.render_all()
    stale = [str(p.relative_to(docs_pages.ROOT)) for p in docs_pages.stale(files)]
    assert not stale, f"stale: {stale}; run python -m benchmarks.docs_pages"


def test_check_mode_agrees() -> None:
    assert docs_pages.main(["--check"]) == 0


def test_every_results_json_has_a_page() -> None:
    covered = {name for p in docs_pages.PAGES for name, _ in p.sources}
    missing = sorted(p.stem for p in RESULTS_DIR.glob("*.json") if p.stem not in covered)
    assert not missing, f"results JSON without a docs page: {missing} (add a Page to benchmarks.docs_pages.PAGES)"


def test_every_rendered_page_is_in_the_nav() -> None:
    nav = docs_pages.MKDOCS.read_text(encoding="utf-8")
    for page in docs_pages.available():
        assert page.path.relative_to(docs_pages.DOCS).as_posix() in nav, page.slug


def _copy_results(tmp_path: Path, names: list[str]) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    for n in names:
        for suffix in (".json", ".png"):
            if (RESULTS_DIR / f"{n}{suffix}").exists():
                shutil.copy(RESULTS_DIR / f"{n}{suffix}", out / f"{n}{suffix}")
    return out


def test_a_changed_number_in_the_json_changes_the_page(tmp_path: Path) -> None:
    page = next(p for p in docs_pages.PAGES if p.slug == "redaction")
    out = _copy_results(tmp_path, ["redaction"])
    before, _ = docs_pages.render_page(page, out)
    payload = json.loads((out / "redaction.json").read_text(encoding="utf-8"))
    payload["benign_altered"]["hardened"] = payload["benign_altered"]["hardened"] + 7
    (out / "redaction.json").write_text(json.dumps(payload), encoding="utf-8")
    after, _ = docs_pages.render_page(page, out)
    assert before != after
    assert f"hardened {payload['benign_altered']['hardened']}." in after


def test_a_page_whose_json_is_absent_is_left_out(tmp_path: Path) -> None:
    out = _copy_results(tmp_path, ["redaction", "crash"])
    slugs = {p.slug for p in docs_pages.available(out)}
    assert slugs == {"redaction", "crash"}
    index = docs_pages.index_page(docs_pages.available(out))
    assert "redaction.md" in index and "serve.md" not in index


def test_unreadable_json_names_the_file(tmp_path: Path) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "redaction.json").write_text("{not json", encoding="utf-8")
    page = next(p for p in docs_pages.PAGES if p.slug == "redaction")
    with pytest.raises(ValueError, match="redaction.json"):
        docs_pages.render_page(page, out)


def test_nav_block_missing_is_an_error() -> None:
    with pytest.raises(ValueError, match="generated results nav"):
        docs_pages.render_mkdocs("site_name: x\nnav:\n  - Home: index.md\n", [])


def test_demote_shifts_headings_outside_code_fences() -> None:
    md = "# Top\n\ntext\n\n```bash\n# a comment\n```\n\n### Deep\n"
    assert docs_pages.demote(md, 2) == "## Top\n\ntext\n\n```bash\n# a comment\n```\n\n#### Deep\n"
