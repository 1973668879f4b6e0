"""The delivery store: every delivery of a quick run rebuilt byte for byte, the arms' renderings recognised as turn
references (not kept as literal text), recurring blocks stored once, and bad stores refused with one line."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from harness.deliveries import (
    TEMPLATES,
    WRITE_STEP,
    DeliveryStoreError,
    DeliveryWriter,
    compact,
    escape,
    measure,
    probe_key,
    read_deliveries,
)
from harness.faults import FaultInjected, FaultPlan
from harness.workloads.arm_text import turn_line
from tests.harness.explore_runs import Capture, cached


@pytest.fixture(scope="module")
def locomo(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    return cached("locomo", tmp_path_factory)


@pytest.fixture(scope="module")
def lme(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    return cached("lme", tmp_path_factory)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    return cached("tiny", tmp_path_factory)


def ok_rows(cap: Capture) -> set[str]:
    return {row for res in cap.results for info in res["arms"].values() if info["status"] == "ok"
            for row in info["rows"]}


def check_every_text(cap: Capture) -> dict[str, list[tuple[str, list[int]]]]:
    """Every delivery of the run rebuilt from the store equals the arm's text; returns per row its part lists."""
    store = read_deliveries(cap.store)
    assert store.verify() == sum(1 for k in cap.texts if k[2] in ok_rows(cap))
    parts: dict[str, list[tuple[str, list[int]]]] = {}
    for (cluster, probe, row), text in cap.texts.items():
        if row not in ok_rows(cap):
            continue
        assert store.text(cluster, probe, row) == text, (cluster, probe, row)
        conv = store.conversations[cluster]
        d = next(d for p, r, d in conv.deliveries() if p["key"] == probe and r == row)
        parts.setdefault(row, []).append((text, flat(conv.record, d[2])))
    return parts


def flat(rec: dict, codes: list[int]) -> list[int]:
    """Block references expanded: literals, units and slices only."""
    out: list[int] = []
    for c in codes:
        if c % 4 == 3:
            out += flat(rec, rec["blocks"][c // 4])
        else:
            out.append(c)
    return out


def kinds(rec: dict, codes: list[int]) -> Counter[str]:
    names = list(TEMPLATES)
    got: Counter[str] = Counter()
    for c in codes:
        i, k = divmod(c, 4)
        if k == 0:
            got["literal"] += 1
        elif k == 1:
            _, tmpl, esc = rec["units"][i]
            got[f"{names[tmpl]}/{rec and ['raw', 'json'][esc]}"] += 1
        else:
            _, tmpl, esc = rec["units"][rec["slices"][i][0]]
            got[f"slice {names[tmpl]}"] += 1
    return got


def test_every_delivery_of_a_quick_locomo_run_rebuilds_byte_for_byte(locomo: Capture) -> None:
    parts = check_every_text(locomo)
    store = read_deliveries(locomo.store)
    [conv] = store.conversations.values()
    rec = conv.record
    assert rec["template_mismatches"] == {}
    n_turns = len(rec["turns"])
    # full: every turn a render_turn unit (`[D1:3] date | Speaker: text`), the newlines literal
    for _text, codes in parts["full"]:
        assert kinds(rec, codes)["render_turn/raw"] == n_turns
    assert all(kinds(rec, c)["render_turn_nodate/raw"] >= 1 for _, c in parts["oracle-nodate"])
    # NP and PM: `Question: [date] Speaker: text` cases are dated_line units
    for row in ("np-pooler@4", "np-mean@8", "pm@4"):
        for text, codes in parts[row]:
            assert kinds(rec, codes)["dated_line/raw"] == text.count("Question: ["), row
    # Tortoise: the digest's `(observation) [date] ...` lines are cut points (slices), the pool's turn Points units
    vol = [kinds(rec, c) for _, c in parts["tortoise-volunteer"]]
    assert all(k["slice dated_line"] >= 1 for k in vol)
    assert any(k["stored_turn/raw"] >= 1 for _, c in parts["tortoise-eval"] for k in [kinds(rec, c)])
    # Fractal: every occurrence of a turn line, in the summary and inside session_history's JSON, is a unit
    lines = {turn_line(t) for t in locomo.conversations[0].turns()}
    for text, codes in parts["fractal"]:
        k = kinds(rec, codes)
        want = sum(text.count(x) for x in lines) + sum(text.count(escape(x, "json")) for x in lines
                                                        if escape(x, "json") != x)
        assert k["turn_line/raw"] + k["turn_line/json"] == want > n_turns, k
    # recurring blocks are stored once: full delivers one transcript per probe, referenced, not repeated
    fulls = [d for p, r, d in conv.deliveries() if r == "full"]
    assert len({json.dumps(d[2]) for d in fulls}) == 1 and len(fulls) == len(rec["probes"])


def test_credited_evidence_and_rankings_are_the_arms(locomo: Capture) -> None:
    from harness.workloads.metrics import delivered_ranking

    store = read_deliveries(locomo.store)
    [conv] = store.conversations.values()
    turns = conv.record["turns"]
    for p, row, d in conv.deliveries():
        delivery = locomo.deliveries[(conv.id, p["key"], row)]
        ev = {turns[i][0] for i in p["evidence"]}
        assert {turns[i][0] for i in d[3]} == ev & delivery.dia_ids
        ranking = delivered_ranking(delivery.meta)
        assert (d[4] is None) == (ranking is None)
        if ranking is not None:
            assert [turns[i][0] if i >= 0 else "?" for i in d[4]] == [x if x in {t[0] for t in turns} else "?"
                                                                        for x in ranking]
    stored = conv.record["stored"]
    assert set(stored) == ok_rows(locomo)
    assert len(stored["full"]) == len(turns) and len(stored["last20"]) == 20


def test_table_counts_match_the_store(locomo: Capture) -> None:
    """The per-probe table's evidence hits are the store's credited evidence, probe by probe and row by row."""
    from harness.probes import read_probes

    run = read_probes(locomo.table)
    store = read_deliveries(locomo.store)
    t = run.table.to_pylist()
    assert len(t) == store.verify()
    for r in t:
        got = store.find(r["cluster"], r["probe"])
        assert got is not None
        conv, p = got
        [d] = [d for q, row, d in conv.deliveries() if q is p and row == r["row"]]
        assert len(d[3]) == r["evidence_hits"]


def test_a_generated_longmemeval_run_rebuilds(lme: Capture) -> None:
    parts = check_every_text(lme)
    store = read_deliveries(lme.store)
    assert store.meta["synthetic"] is True
    for conv in store.conversations.values():
        assert conv.record["template_mismatches"] == {}
        assert [p["key"] for p in conv.record["probes"]] == [conv.id]  # one question per conversation
    # the date header inside the first turn and roles as speakers are still recognised as turns
    assert all(kinds(conv.record, c)["render_turn/raw"] >= 1 for _, c in parts["full"]
               for conv in store.conversations.values())


def test_probe_key_is_the_tables(lme: Capture, small: Capture) -> None:
    from harness.probes import from_probe_record

    for cap in (lme, small):
        for res in cap.results:
            conv = next(c for c in cap.conversations if c.sample_id == res["conversation"])
            by_index = {p.index: p for p in conv.probes}
            for rec in res["records"]:
                row = from_probe_record(rec, workload=conv.workload, arm="x")
                assert probe_key(by_index[rec["probe"]], conv) == (row["cluster"], row["probe"])


def test_tiny_run_and_size(small: Capture) -> None:
    check_every_text(small)
    m = measure(read_deliveries(small.store))
    assert m["deliveries"] == sum(1 for k in small.texts if k[2] in ok_rows(small))
    assert m["inline_bytes"] > m["json_bytes"] > m["file_bytes"] > 0


def test_compact_keeps_the_chosen_deliveries_exact(locomo: Capture) -> None:
    store = read_deliveries(locomo.store)
    [conv] = store.conversations.values()
    rec = conv.record
    keep = {0, len(rec["probes"]) - 1}
    cut = compact(rec, keep)
    assert {d[0] for d in cut["deliveries"]} == keep
    assert len(cut["blocks"]) < len(rec["blocks"])
    from harness.deliveries import StoredConversation

    small = StoredConversation(cut, conv.templates, conv.escapes)
    for p, row, d in small.deliveries():
        assert small.text(d) == locomo.texts[(conv.id, p["key"], row)]


def test_the_write_is_atomic_with_its_fault_step(tmp_path: Path) -> None:
    from harness.workloads.baselines import FullContextArm
    from tests.harness.locomo_arms_fixture import tiny_conversation

    conv = tiny_conversation()
    arm = FullContextArm()
    arm.ingest(conv)
    path = tmp_path / "x.deliveries.json.gz"
    w = DeliveryWriter(path, fault_hook=FaultPlan({WRITE_STEP: 1}))
    w.add(conv, conv.probes[0], "full", arm.deliver(conv.probes[0])["full"])
    with pytest.raises(FaultInjected):
        w.close()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="added twice"):
        w.add(conv, conv.probes[0], "full", arm.deliver(conv.probes[0])["full"])


def _rewrite(path: Path, change, folder: Path) -> Path:
    """A changed copy of the store ``path`` in ``folder`` (the run folder is shared by other tests)."""
    data = json.loads(gzip.decompress(path.read_bytes()))
    change(data)
    out = folder / ("changed-" + change.__name__ + path.name)
    out.write_bytes(gzip.compress(json.dumps(data).encode()))
    return out


def test_bad_stores_are_one_line_naming_the_file(small: Capture, tmp_path: Path) -> None:
    cases = {
        "missing": tmp_path / "none.deliveries.json.gz",
        "not gzip": tmp_path / "a.deliveries.json.gz",
        "truncated": tmp_path / "b.deliveries.json.gz",
    }
    cases["not gzip"].write_text("{}")
    cases["truncated"].write_bytes(small.store.read_bytes()[:200])
    for path in cases.values():
        with pytest.raises(DeliveryStoreError) as exc:
            read_deliveries(path)
        assert str(path) in str(exc.value) and "\n" not in str(exc.value)

    def foreign(d: dict) -> None:
        d["format"] = "other"

    def newer(d: dict) -> None:
        d["version"] = 99

    def dangling(d: dict) -> None:
        d["conversations"][0]["deliveries"][0][2].append(10**6 * 4 + 1)

    def cycle(d: dict) -> None:
        d["conversations"][0]["blocks"][0].append((len(d["conversations"][0]["blocks"]) - 1) * 4 + 3)

    for change, words in ((foreign, "not a memsim delivery store"), (newer, "version 99"),
                          (dangling, "refers to nothing"), (cycle, "later block")):
        bad = _rewrite(small.store, change, tmp_path)
        with pytest.raises(DeliveryStoreError, match=words) as exc:
            read_deliveries(bad)
        assert str(bad) in str(exc.value)

    def edited(d: dict) -> None:  # a literal changed: reads, but does not rebuild to the recorded texts
        lits = d["conversations"][0]["lits"]
        lits[0] = lits[0] + "!"

    with pytest.raises(DeliveryStoreError, match="damaged") as exc:
        read_deliveries(_rewrite(small.store, edited, tmp_path)).verify()
    assert "\n" not in str(exc.value)


def test_fractal_json_escaped_history_is_referenced(tmp_path: Path) -> None:
    """A turn whose text needs JSON escaping (quotes, a newline) is referenced escaped inside Fractal's
    session_history and raw in its summary, and the text still rebuilds exactly."""
    from harness.workloads.base import ArmContext
    from harness.workloads.fractal_arm import FractalArm
    from harness.workloads.locomo import Session
    from tests.harness.locomo_arms_fixture import tiny_conversation

    conv = tiny_conversation()
    s1 = conv.sessions[0]
    quoted = s1.turns[0].model_copy(update={"text": 'I said "Biscuit"\\ and then:\nmore on a new line.'})
    conv = conv.model_copy(update={"sessions": [Session(index=1, date_time=s1.date_time,
                                                        turns=[quoted, *s1.turns[1:]]),
                                                *conv.sessions[1:]]})
    arm = FractalArm(ArmContext(workdir=tmp_path))
    arm.ingest(conv)
    d = arm.deliver(conv.probes[0])["fractal"]
    arm.close()
    w = DeliveryWriter(tmp_path / "f.deliveries.json.gz")
    w.add(conv, conv.probes[0], "fractal", d)
    store = read_deliveries(w.close())
    [c] = store.conversations.values()
    assert store.text(c.id, "0", "fractal") == d.text
    k = kinds(c.record, flat(c.record, c.record["deliveries"][0][2]))
    escaped = escape(turn_line(quoted), "json")
    assert escaped != turn_line(quoted) and escaped in d.text
    assert k["turn_line/json"] == d.text.count(escaped) >= 1 and k["turn_line/raw"] >= 1, k


class FailingArm:
    """An arm that delivers the first probe and fails on the second (its rows must not reach the store)."""

    name = "boom"
    rows = ("boom",)

    def __init__(self, ctx) -> None:
        self.n = 0

    def ingest(self, conversation) -> None:
        self.turns = conversation.turns()

    def deliver(self, probe):
        from harness.workloads.base import Delivery

        self.n += 1
        if self.n > 1:
            raise RuntimeError("boom")
        return {"boom": Delivery(text=self.turns[0].text, dia_ids=frozenset({self.turns[0].dia_id}))}

    def stored(self) -> frozenset[str]:
        return frozenset({self.turns[0].dia_id})

    def close(self) -> None:
        pass


def test_rows_of_an_arm_that_failed_are_dropped_and_stored_ids_kept(tmp_path: Path) -> None:
    from harness.deliveries.run import run_recorded
    from harness.workloads.arms import ArmSpec
    from tests.harness.locomo_arms_fixture import tiny_conversation

    conv = tiny_conversation()
    w = DeliveryWriter(tmp_path / "t.deliveries.json.gz")
    res = run_recorded(conv, ["last20", ArmSpec("boom", "design", "fails", __name__, "FailingArm")],
                       tmp_path / "work", w)
    assert res["arms"]["boom"]["status"] == "error" and res["arms"]["last20"]["status"] == "ok"
    [c] = read_deliveries(w.close()).conversations.values()
    assert {row for _, row, _ in c.deliveries()} == {"last20"}
    assert set(c.record["stored"]) == {"last20"} and len(c.record["stored"]["last20"]) == len(conv.turns())
