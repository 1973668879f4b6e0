"""The explorer page in a real browser (headless Chromium from file://): it loads without a console error, lists the
run's questions, each filter gives the count the per-probe table gives in Python, a question view shows every
selected row with exactly the evidence the run credited highlighted, the browser rebuilds every delivered text byte
for byte, the URL fragment restores a view, and 800 pixels need no horizontal scrolling."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.deliveries import read_deliveries
from harness.explore import display_id, write_explorer
from harness.probes import read_probes
from tests.harness.explore.conftest import open_page
from tests.harness.explore_runs import Capture, cached


@pytest.fixture(scope="module")
def locomo(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    return cached("locomo", tmp_path_factory)


@pytest.fixture(scope="module")
def lme(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    return cached("lme", tmp_path_factory)


def ledger_quoting(path: Path, ids: list[tuple[str, str]]) -> Path:
    rows = [{"id": "XD-98", "verdict": "holds", "statement": "quotes probes", "measured": {
        "examples": [{"conversation": c, "probe": p} for c, p in ids[:1]] + [list(x) for x in ids[1:]]}},
        {"id": "XD-97", "verdict": "holds", "statement": "quotes none", "measured": {}}]
    path.write_text(json.dumps({"rows": rows}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def page(locomo: Capture, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = read_probes(locomo.table)
    keys = list(dict.fromkeys(zip(run.table.column("cluster").to_pylist(), run.table.column("probe").to_pylist(),
                                  strict=True)))
    ledger = ledger_quoting(tmp_path_factory.mktemp("ledger") / "ledger.json", keys[::2])
    return write_explorer(locomo.run_dir, "locomo", ledger=ledger)


def table_rows(cap: Capture) -> list[dict[str, Any]]:
    return read_probes(cap.table).table.to_pylist()


def shows(driver: Any, qid: str) -> None:
    """Wait until the question view shows ``qid`` (a key press changes the fragment; the view follows it)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(lambda d: d.find_element("id", "v-id").text == qid)


def visible(driver: Any) -> int:
    return len(driver.execute_script("return window.memsimExplore.visibleIds()"))


def choose(driver: Any, select_id: str, value: str) -> None:
    driver.execute_script("var s = document.getElementById(arguments[0]); s.value = arguments[1];"
                          "s.dispatchEvent(new Event('change'));", select_id, value)


def type_text(driver: Any, text: str) -> None:
    driver.execute_script("var s = document.getElementById('f-text'); s.value = arguments[0];"
                          "s.dispatchEvent(new Event('input'));", text)


def test_loads_from_file_with_no_console_error_and_lists_every_question(browser: Any, page: Path,
                                                                        locomo: Capture) -> None:
    assert open_page(browser, page) == []
    keys = {(r["cluster"], r["probe"]) for r in table_rows(locomo)}
    assert browser.execute_script("return window.memsimExplore.questions") == len(keys)
    assert len(browser.find_elements("css selector", "#qbody tr")) == len(keys)
    assert browser.find_element("id", "f-count").text == f"{len(keys)} of {len(keys)} questions shown"
    html = page.read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html and "<script src" not in html


def test_each_filter_counts_what_the_table_counts(browser: Any, page: Path, locomo: Capture) -> None:
    open_page(browser, page)
    rows = table_rows(locomo)
    by_probe: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        by_probe.setdefault((r["cluster"], r["probe"]), {})[r["row"]] = r
    cats = Counter(next(iter(v.values()))["category"] for v in by_probe.values())
    for cat, n in cats.items():
        choose(browser, "f-cat", cat)
        assert visible(browser) == n, cat
    choose(browser, "f-cat", "")
    store = read_deliveries(locomo.store)
    probes = [p for c in store.conversations.values() for p in c.record["probes"]]
    for word in ("what", "caroline", "2023", "zzz-none"):
        want = sum(1 for p in probes if any(word in str(x).lower() for x in (p["question"], p["answer"],
                                                                               p["adversarial_answer"]) if x))
        type_text(browser, word)
        assert visible(browser) == want, word
    type_text(browser, "")
    names = list(dict.fromkeys(r["row"] for r in rows))
    pairs = [(a, b) for a in names for b in names if a != b][:: max(1, len(names) // 3)]
    for a, b in pairs:
        want = sum(1 for v in by_probe.values() if a in v and b in v and v[a]["all_evidence"] is True
                   and v[b]["all_evidence"] is False)
        choose(browser, "f-a", a)
        choose(browser, "f-b", b)
        assert visible(browser) == want, (a, b)
    choose(browser, "f-a", "")
    keys = list(by_probe)
    choose(browser, "f-claim", "XD-98")
    assert sorted(browser.execute_script("return window.memsimExplore.visibleIds()")) == sorted(
        display_id(*k) for k in keys[::2])
    assert len(browser.find_elements("css selector", "#f-claim option")) == 2  # all, and the claim quoting probes


def expected_marks(rec: dict[str, Any], probe: dict[str, Any], d: list[Any]) -> tuple[set[str], set[str]]:
    """(evidence turns highlighted as delivered, evidence turns highlighted as cut or escaped) of one delivery."""
    ev, credited = set(probe["evidence"]), set(d[3])
    hit: set[str] = set()
    cut: set[str] = set()

    def walk(codes: list[int]) -> None:
        for c in codes:
            i, k = divmod(c, 4)
            if k == 3:
                walk(rec["blocks"][i])
            elif k in (1, 2):
                turn = rec["units"][i if k == 1 else rec["slices"][i][0]][0]
                if turn in ev:
                    (hit if k == 1 and turn in credited else cut).add(rec["turns"][turn][0])

    walk(d[2])
    return hit, cut


def test_question_view_shows_every_row_and_the_evidence_the_run_credited(browser: Any, page: Path,
                                                                         locomo: Capture) -> None:
    store = read_deliveries(locomo.store)
    [conv] = store.conversations.values()
    table = {(r["cluster"], r["probe"], r["row"]): r for r in table_rows(locomo)}
    rows = list(dict.fromkeys(k[2] for k in table))
    checked_hits = 0
    for probe in conv.record["probes"]:
        qid = display_id(conv.id, probe["key"])
        assert open_page(browser, page, f"#q={qid}&rows={','.join(rows)}") == []
        panels = browser.find_elements("css selector", "#panels section.panel")
        assert [p.get_attribute("data-row") for p in panels] == rows
        for p, row, d in conv.deliveries():
            if p is not probe:
                continue
            [panel] = [x for x in panels if x.get_attribute("data-row") == row]
            hit, cut = expected_marks(conv.record, probe, d)
            marks = panel.find_elements("css selector", "pre.text mark")
            assert {m.get_attribute("data-turn") for m in marks if m.get_attribute("class") == "hit"} == hit, row
            assert {m.get_attribute("data-turn") for m in marks if m.get_attribute("class") == "cut"} == cut, row
            statuses = [li.get_attribute("data-status") for li in panel.find_elements("css selector", ".evlist li")]
            assert statuses.count("delivered") == table[(conv.id, probe["key"], row)]["evidence_hits"], row
            stored = set(conv.record["stored"][row])
            assert statuses.count("stored-not-delivered") == len((set(probe["evidence"]) - set(d[3])) & stored)
            checked_hits += len(hit)
    assert checked_hits > 0


def test_the_browser_rebuilds_every_delivered_text(browser: Any, page: Path, locomo: Capture) -> None:
    open_page(browser, page)
    ok = {row for res in locomo.results for info in res["arms"].values() if info["status"] == "ok"
          for row in info["rows"]}
    keys = [k for k in locomo.texts if k[2] in ok]
    got = browser.execute_script("return arguments[0].map(function (k) { return window.memsimExplore.text(k[0], "
                                 "k[1]); })", [[display_id(c, p), r] for c, p, r in keys])
    for k, text in zip(keys, got, strict=True):
        assert text == locomo.texts[k], k


def test_the_fragment_restores_a_view_and_j_k_move(browser: Any, page: Path, locomo: Capture) -> None:
    store = read_deliveries(locomo.store)
    [conv] = store.conversations.values()
    ids = [display_id(conv.id, p["key"]) for p in conv.record["probes"]]
    open_page(browser, page, f"#q={ids[1]}&rows=fractal,full")
    assert browser.find_element("id", "view").is_displayed()
    assert browser.find_element("id", "v-id").text == ids[1]
    assert [p.get_attribute("data-row") for p in browser.find_elements("css selector", "#panels .panel")] == [
        "fractal", "full"]
    body = browser.find_element("tag name", "body")
    body.send_keys("j")
    shows(browser, ids[2])
    assert browser.execute_script("return location.hash") == f"#q={ids[2]}&rows=fractal,full"
    body.send_keys("k")
    shows(browser, ids[1])
    body.send_keys("k")
    shows(browser, ids[0])
    browser.find_element("id", "back").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(lambda d: d.find_element("id", "list").is_displayed())
    marks = browser.find_elements("css selector", "#qhead th.rowhead")
    assert [m.get_attribute("title") for m in marks] == ["fractal", "full"]


def test_800_pixels_need_no_horizontal_scrolling(browser: Any, page: Path, locomo: Capture) -> None:
    store = read_deliveries(locomo.store)
    [conv] = store.conversations.values()
    qid = display_id(conv.id, conv.record["probes"][0]["key"])
    width = "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    open_page(browser, page, width=800)
    scroll, client = browser.execute_script(width)
    assert scroll <= client
    for row in ("fractal", "full", "tortoise-eval"):
        open_page(browser, page, f"#q={qid}&rows={row}", width=800)
        scroll, client = browser.execute_script(width)
        assert scroll <= client, row
        pre = browser.find_element("css selector", "pre.text")
        assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth", pre), row
        assert pre.size["width"] > 500  # one row's text takes the width, it is not squeezed into a column


def test_a_generated_longmemeval_page(browser: Any, lme: Capture) -> None:
    path = write_explorer(lme.run_dir, "longmemeval")
    assert open_page(browser, path) == []
    assert "synthetic data" in browser.find_element("css selector", "header .sub").text
    store = read_deliveries(lme.store)
    ids = [c.id for c in store.conversations.values()]
    assert browser.execute_script("return window.memsimExplore.visibleIds()") == ids
    open_page(browser, path, f"#q={ids[0]}&rows=full,tortoise-eval-noexp")
    assert browser.find_element("id", "v-id").text == ids[0]
    got = browser.execute_script("return window.memsimExplore.text(arguments[0], 'tortoise-eval-noexp')", ids[0])
    assert got == lme.texts[(ids[0], ids[0], "tortoise-eval-noexp")]
