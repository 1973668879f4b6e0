"""Stateful property test of Fractal session memory (hypothesis ``RuleBasedStateMachine``).

Rules: submit (succeed / fail / max_iterations / cancel without flag / interrupt during the call / interrupt
before the call), resume, new, save, load. Invariants: history <= 20 after every trim point, summary length ==
number of submits to the current session, history == the last <= 20 summary turns with agreeing statuses (so every
finalized summary turn has a history entry unless evicted), and the file on disk parses, validates, round-trips
byte for byte and equals the in-memory state.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fractal_sim import FractalRuntime, FractalSession, ScriptedAgent, SessionState, TraceSpec, TurnScript
from fractal_sim.agent import Cancel, Raise, Read, Return, Run, SetInterrupt, Write
from fractal_sim.store import serialize_state

OUTCOMES = {
    "succeed": lambda: TurnScript([Read("a.py"), Write("b.py", "b"), Run("pytest -q")], Return("done", ["b.py"])),
    "fail": lambda: TurnScript([Run(["make", "x"], ok=False)], Raise("boom")),
    "max_iterations": lambda: TurnScript([], Return("partial", []), trace=TraceSpec(status="max_iterations")),
    "cancel": lambda: TurnScript([], Cancel()),
    "interrupt": lambda: TurnScript([SetInterrupt()], Cancel()),
    "interrupt_raise": lambda: TurnScript([SetInterrupt()], Raise("late")),
}
EXPECTED_STATUS = {"succeed": "succeeded", "fail": "failed", "max_iterations": "max_iterations",
                   "cancel": "pending", "interrupt": "interrupted", "interrupt_raise": "interrupted",
                   "pre_interrupt": "interrupted"}


class FractalMemory(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="fractal-sm-"))
        self.ws = self.tmp / "ws"
        self.ws.mkdir()
        (self.ws / "a.py").write_text("a")
        self.state_dir = self.tmp / "state"
        self.agent = ScriptedAgent()
        self.rt = FractalRuntime(self.ws, agent=self.agent, state_dir=self.state_dir)
        self.submits: dict[str, int] = {self.rt.session.session_id: 0}
        self.last_status: dict[str, str] = {}

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def sid(self) -> str:
        return self.rt.session.session_id

    @rule(kind=st.sampled_from([*OUTCOMES, "pre_interrupt"]), message=st.text(max_size=12))
    def submit(self, kind: str, message: str) -> None:
        self.agent.clear_interrupt()
        flag = (lambda: True) if kind == "pre_interrupt" else self.agent.interrupt_requested
        if kind != "pre_interrupt":
            self.agent.add(OUTCOMES[kind]())
        calls_before = len(self.agent.calls)
        try:
            asyncio.run(self.rt.submit(message, interrupt_requested=flag))
            raised = None
        except (Exception, asyncio.CancelledError) as exc:
            raised = exc
        self.submits[self.sid] = self.submits.get(self.sid, 0) + 1
        last = self.rt.session.state.summary.turns[-1]
        status = last.agent.status if last.agent else "pending"
        assert status == EXPECTED_STATUS[kind]
        assert last.user.message == message
        assert (raised is None) == (kind in ("succeed", "max_iterations"))
        assert len(self.agent.calls) == calls_before + (0 if kind == "pre_interrupt" else 1)

    @precondition(lambda self: any(self.state_dir.glob("workspaces/*/sessions/*.json")))
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        stored = sorted(p.stem for p in self.state_dir.glob("workspaces/*/sessions/*.json"))
        sid = data.draw(st.sampled_from(stored))
        self.rt.resume(sid)
        assert len(self.rt.session.state.summary.turns) == self.submits[sid]

    @rule()
    def new(self) -> None:
        self.rt.new_session()
        self.submits[self.sid] = 0
        assert not self.rt.session_file().exists()

    @rule()
    def save(self) -> None:
        self.rt.save()

    @precondition(lambda self: self.rt.session_file().exists())
    @rule()
    def load(self) -> None:
        loaded = FractalSession.load(self.ws, session_id=self.sid, state_dir=self.state_dir)
        assert loaded.state == self.rt.session.state

    @invariant()
    def history_capped(self) -> None:
        assert len(self.rt.session.state.history) <= 20

    @invariant()
    def summary_counts_submits(self) -> None:
        assert len(self.rt.session.state.summary.turns) == self.submits[self.sid]

    @invariant()
    def history_is_recent_summary_tail(self) -> None:
        turns = self.rt.session.state.summary.turns
        history = self.rt.session.state.history
        assert [h.turn_id for h in history] == [t.turn_id for t in turns[-20:]]
        for h, t in zip(history, turns[-20:], strict=True):
            assert h.status == (t.agent.status if t.agent else "pending")
            if t.agent is not None:
                assert t.agent.files_read_count == len(h.files_read)
                assert t.agent.commands_run_count == len(h.commands_run)
                assert t.agent.files_changed_count == len(h.files_modified)

    @invariant()
    def file_round_trips(self) -> None:
        path = self.rt.session_file()
        if not path.exists():
            return
        text = path.read_text(encoding="utf-8")
        assert text.isascii() and text.endswith("\n")
        state = SessionState.model_validate(json.loads(text))
        assert serialize_state(state) == text
        assert state == self.rt.session.state


TestFractalMemory = FractalMemory.TestCase
TestFractalMemory.settings = settings(max_examples=15, stateful_step_count=30, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
