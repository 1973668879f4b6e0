"""The claims ledger page (``ledger.html``) in a real browser: no console error from file://, each filter shows the
claims Python counts, a header click sorts (and a second click reverses), evidence and measured values are folded
until opened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.ledger import Ledger, LedgerRow, write_html
from tests.harness.explore.conftest import open_page

ROWS = [  # (id, design, kind, verdict, seconds, statement, evidence)
    ("FRA-02", "fractal", "mechanism", "holds", 0.5, "The summary keeps user messages verbatim.", "Turn 1 ..."),
    ("FRA-10", "fractal", "consequence", "refuted", 3.25, "Each submit saves twice.", "saves: 3"),
    ("AGF-13", "agentfly", "mechanism", "holds", 12.0, "The NP selector uses the pooler output.", "pooler ..."),
    ("TOR-45", "tortoise", "mechanism", "error", 0.01, "Expansion orders turns by string id.", "Traceback ..."),
    ("XD-05", "cross", "consequence", "skipped", 1.0, "Fractal delivers most evidence.", "no LoCoMo data"),
    ("TOR-9", "tortoise", "consequence", "holds", 7.5, "A tombstoned point is never volunteered.", "block: ''"),
]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [LedgerRow(id=i, design=d, record=f"REC-{d}", kind=k, statement=s, verdict=v, measured={"n": n},
                      evidence=ev, note="", seconds=sec, source="test")
            for n, (i, d, k, v, sec, s, ev) in enumerate(ROWS)]
    ledger = Ledger(created="2026-01-01T00:00:00Z", memsim_version="0", machine="test", python="3", rows=rows)
    return write_html(ledger, tmp_path_factory.mktemp("ledger") / "ledger.html")


def shown(driver: Any) -> list[str]:
    return [r.get_attribute("id") for r in driver.find_elements("css selector", "#claims > tbody > tr")
            if r.is_displayed()]


def choose(driver: Any, select_id: str, value: str) -> None:
    driver.execute_script("var s = document.getElementById(arguments[0]); s.value = arguments[1];"
                          "s.dispatchEvent(new Event('change'));", select_id, value)


def test_loads_and_filters_count_what_python_counts(browser: Any, page: Path) -> None:
    assert open_page(browser, page) == []
    assert len(shown(browser)) == len(ROWS)
    for col, field in (("f-design", 1), ("f-verdict", 3), ("f-kind", 2)):
        for value in {r[field] for r in ROWS}:
            choose(browser, col, value)
            want = [r[0].lower() for r in ROWS if r[field] == value]
            assert shown(browser) == want, (col, value)
            assert browser.find_element("id", "f-count").text == f"{len(want)} of {len(ROWS)} claims shown"
        choose(browser, col, "")
    choose(browser, "f-design", "tortoise")
    choose(browser, "f-verdict", "holds")
    assert shown(browser) == ["tor-9"]
    choose(browser, "f-design", "")
    choose(browser, "f-verdict", "")
    browser.execute_script("var s = document.getElementById('f-text'); s.value = 'pooler';"
                           "s.dispatchEvent(new Event('input'));")
    assert shown(browser) == ["agf-13"]


def test_header_clicks_sort_and_reverse(browser: Any, page: Path) -> None:
    open_page(browser, page)
    heads = browser.find_elements("css selector", "#claims thead th")
    seconds = [h for h in heads if h.text.startswith("seconds")][0]
    seconds.click()
    assert shown(browser) == [r[0].lower() for r in sorted(ROWS, key=lambda r: r[4])]
    assert seconds.get_attribute("aria-sort") == "ascending"
    seconds.click()
    assert shown(browser) == [r[0].lower() for r in sorted(ROWS, key=lambda r: -r[4])]
    assert "descending" in seconds.text
    ids = [h for h in heads if h.text.startswith("id")][0]
    ids.click()  # ids sort by prefix, then number: TOR-9 before TOR-45
    assert shown(browser) == ["agf-13", "fra-02", "fra-10", "tor-9", "tor-45", "xd-05"]


def test_evidence_is_folded_until_opened(browser: Any, page: Path) -> None:
    open_page(browser, page)
    row = browser.find_element("id", "agf-13")
    details = row.find_elements("css selector", "details")
    assert [d.find_element("tag name", "summary").text for d in details] == ["measured", "evidence"]
    evidence = details[1]
    assert evidence.get_attribute("open") is None
    assert not evidence.find_element("tag name", "pre").is_displayed()
    evidence.find_element("tag name", "summary").click()
    assert evidence.get_attribute("open") is not None
    assert evidence.find_element("tag name", "pre").text == "pooler ..."
