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


def test_stored_levels_equal_their_judgement_from_the_measured_numbers(tmp_path: Path) -> None:
    """A results JSON keeps its levels beside the numbers they judge; re-judging them from those numbers (nothing
    re-measured) must change nothing, so a level left stale by a later change of its rule or of a JSON it reads
    fails here (engines and cost: ``tests/benchmarks/test_engines_render.py``)."""
    from benchmarks import locomo_paper

    src = RESULTS_DIR / "locomo-paper.json"
    if not src.is_file():
        pytest.skip("no committed locomo-paper.json")
    shutil.copy(src, tmp_path / src.name)
    locomo_paper.rerender(tmp_path / src.name)
    assert json.loads((tmp_path / src.name).read_text(encoding="utf-8")) == json.loads(src.read_text(encoding="utf-8"))
    assert (tmp_path / "locomo-paper.md").read_text(encoding="utf-8") == (RESULTS_DIR / "locomo-paper.md").read_text(
        encoding="utf-8")


def test_the_locomo_paper_budget_is_judged_on_the_protocol_phase_and_on_the_wall() -> None:
    from benchmarks import locomo_paper

    payload = json.loads((RESULTS_DIR / "locomo-paper.json").read_text(encoding="utf-8"))
    t = payload["timings"]
    t["protocol_s"], t["wall_s"] = 78.0, 926.0
    t["level"] = {**t["level"], "applies": True, "met": True, "protocol_met": True, "wall_met": True}  # stale
    line = locomo_paper.docs_page(payload)
    assert "judged on the protocol phase (78 s): met" in line
    assert "judged on the whole run's wall time, design rows included (926 s): missed" in line
    lv = locomo_paper.budget_level(78.0, 926.0, True)
    assert (lv["protocol_met"], lv["wall_met"], lv["met"]) == (True, False, False)
    assert locomo_paper.budget_level(78.0, 500.0, True)["met"] is True
    off = locomo_paper.budget_level(78.0, 926.0, False)
    assert (off["protocol_met"], off["wall_met"], off["met"]) == (None, None, None)
    t["level"]["applies"] = False
    assert "not applicable to this run" in locomo_paper.docs_page(payload)
