"""Hypothesis state machine over create/checkpoint/diary/retract/supersede/capture/volunteer (issue 5)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tests.tortoise_sim.simkit import make_sim
from tortoise_sim import LifecycleError
from tortoise_sim.digest import render_digest
from tortoise_sim.lifecycle import transition_allowed
from tortoise_sim.volunteer import SUPERSEDED_FLAG

WORDS = ["kuzu", "billing", "deploy", "cache", "schema", "backup", "latency", "pager", "quota", "vendor"]
phrase = st.lists(st.sampled_from(WORDS), min_size=2, max_size=5).map(lambda ws: "note about " + " ".join(ws))
kinds = st.sampled_from(["decision", "statement", "observation", "plan"])


class TortoiseMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self):
        self.sim = make_sim()
        self.status: dict[str, str | None] = {}
        self.n = 0

    def teardown(self):
        if hasattr(self, "sim"):
            self.sim.close()

    def _ids(self):
        return sorted(self.status)

    @rule(kind=kinds, content=phrase, live=st.booleans(), gold=st.booleans())
    def create(self, kind, content, live, gold):
        self.n += 1
        pid = self.sim.create_point(kind, f"{content} #{self.n}", credibility="gold" if gold else None)["id"]
        if live:
            self.sim.update_point(pid, status="live")
        self.status[pid] = self.sim.get_point(pid)["status"]

    @rule(items=st.lists(phrase, min_size=1, max_size=3))
    def checkpoint(self, items):
        res = self.sim.checkpoint([{"content": c} for c in items], threshold=1.0)
        assert res["filed"] + res["duplicates"] == len(items)
        for pid in res["ids"]:
            self.status[pid] = "draft"

    @rule(entry=phrase)
    def diary(self, entry):
        self.status[self.sim.diary_write("agent", entry)["id"]] = "draft"

    @rule(i=st.integers(0, 50))
    def retract(self, i):
        ids = self._ids()
        if not ids:
            return
        pid = ids[i % len(ids)]
        try:
            self.sim.retract_point(pid)
        except LifecycleError as e:
            assert e.code == "already_terminal" and self.status[pid] in ("retracted", "superseded")

    @rule(i=st.integers(0, 50), j=st.integers(0, 50))
    def supersede(self, i, j):
        ids = self._ids()
        if len(ids) < 2:
            return
        old, new = ids[i % len(ids)], ids[j % len(ids)]
        try:
            self.sim.supersede_point(old, new)
        except LifecycleError as e:
            assert e.code in ("already_terminal", "same_point")

    @rule(lines=st.lists(phrase, min_size=1, max_size=3), sid=st.sampled_from(["s1", "s2"]))
    def capture(self, lines, sid):
        conv = [{"role": "user", "content": "decision: " + ln} for ln in lines]
        res = self.sim.capture_session(conv, sid)
        for p in res["points"]:
            self.status.setdefault(p["id"], self.sim.get_point(p["id"])["status"])
        for r in self.sim.store.query("MATCH (p:Point) WHERE p.is_operator = true RETURN p.id AS id"):
            self.status.pop(r["id"], None)

    @rule(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def volunteer(self, words):
        res = self.sim.volunteer_context([{"role": "user", "content": f"What did we decide about {' '.join(words)}?"}])
        assert len(res["pointers"]) <= 3
        for p in res["pointers"]:
            row = self.sim.get_point(p["id"])
            assert row["status"] != "retracted"
            line = next(ln for ln in res["block"].splitlines() if f"point/{p['id']}" in ln)
            if row["status"] == "superseded" or row.get("outdated"):
                assert SUPERSEDED_FLAG in line  # never a current-view pointer
        assert res["block"] == "" or len(res["block"].encode()) <= 8192

    @invariant()
    def transitions_allowed(self):
        if not hasattr(self, "sim"):
            return
        for pid, old in list(self.status.items()):
            row = self.sim.get_point(pid)
            if row is None:
                continue
            new = row["status"]
            assert transition_allowed(old, new), (pid, old, new)
            self.status[pid] = new

    @invariant()
    def feed_seq_strictly_increasing(self):
        if not hasattr(self, "sim"):
            return
        seqs = [e["seq"] for e in self.sim.store.feed()]
        assert seqs == list(range(1, len(seqs) + 1))

    @invariant()
    def digest_caps(self):
        if not hasattr(self, "sim"):
            return
        text = render_digest(self.sim.session_context())
        lines = text.splitlines()
        assert sum(ln.startswith("- (") for ln in lines) <= 8
        assert sum(ln.startswith("- [2") for ln in lines) <= 5
        assert all(len(ln) <= 200 for ln in lines)


TortoiseMachine.TestCase.settings = settings(max_examples=10, stateful_step_count=10, deadline=None,
                                             suppress_health_check=[HealthCheck.too_slow])
TestTortoiseMachine = TortoiseMachine.TestCase
