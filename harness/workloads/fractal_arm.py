"""Fractal arm: a LoCoMo conversation as one Fractal session of submits; a probe is one more submit.

Mapping choices (each one a decision of this adapter, not of Fractal):

- **Submits.** Within a session, turns are paired in order: the first unpaired turn is the user message, and the
  next turn is the agent's whole response when it exists and comes from the other speaker. A turn with no such
  reply (the last turn of a session, or a speaker talking twice in a row) submits with an empty response. Pairs
  never cross a session boundary. On a workload with roles (LongMemEval) a pair is a ``user`` turn and the
  ``assistant`` turn that follows it, which is Fractal's own shape (a user message and the agent's reply); an
  ``assistant`` turn that no user turn precedes (a session that opens with the assistant) submits on its own as
  the message, with an empty response, like LoCoMo's unpaired turns. Both sides carry the speaker name: ``arm_text.turn_line`` (``"Caroline: ..."``,
  photo caption appended).
- **Dates.** Fractal has no notion of time a user could set (its timestamps are wall-clock and never rendered,
  FRA-02), so the session date-time travels in the text: the user message of the first submit of every LoCoMo
  session starts with the line ``"(session <n>: <date-time>)"``. The summary keeps every user message verbatim
  (FRA-01), so each session's date stays model-visible. A session without a date-time (LongMemEval's: its date
  is already the header line of the session's first turn, ``harness.workloads.lme_workload``) gets no such line.
- **One Fractal session** per conversation, driven by ``FractalRuntime.submit`` with a ``ScriptedAgent`` whose
  script returns the reply text (no workspace actions, the default scripted trace). Each submit performs the
  runtime's two saves (FRA-10), so after ingest the session file holds everything; the arm then reloads the
  session from that file (``FractalRuntime.resume``), so probes are answered from the persisted state.
- **Probe = one more submit**, all asked after the last session. Delivered = ``AgentCall.model_visible_text()`` of
  the agent call for the question: the signature instructions (with the rendered summary, FRA-19), every field
  description and the four inputs as JSON (the history tail of at most 20 turns, FRA-04). This is the capture the
  Fractal claims use for "what the model receives" (FRA-42).
- **No leaks between probes, no copy per probe.** ``submit`` changes exactly two things before the agent runs:
  it appends one summary turn and appends one history turn (trimming the tail to 20). The arm performs that same
  ``add_user_message`` on the loaded session, calls the agent with the same arguments ``submit`` passes
  (``summary()``, ``session_history_payload()``), then removes the appended summary turn and puts back the saved
  history list (20 references). The probe's two saves are skipped, so the session file never sees a probe.
  Cost per probe: rendering the summary (linear in the conversation, which is the design's own cost) and
  nothing else proportional to it.
- **Provenance**: ``dia_ids`` = the turns whose rendered line occurs in the delivered text (``ids_in_text``);
  ``stored()`` reads the session file back and looks for each turn's line in the stored user messages, responses
  and history messages.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from fractal_sim import FractalRuntime, Return, ScriptedAgent, TurnScript
from harness.progress import report
from harness.workloads.arm_text import ids_in_text, turn_line, turn_snippets
from harness.workloads.base import ArmContext, Delivery
from harness.workloads.locomo import Conversation, Probe, Turn


def session_header(index: int, date_time: str) -> str:
    """The line that carries a LoCoMo session's date-time into the first user message of that session (``""``
    for a session without one)."""
    return f"(session {index}: {date_time})" if date_time else ""


def _replies(user: Turn, reply: Turn) -> bool:
    """Whether ``reply`` answers ``user``: the other speaker; with roles, an assistant turn after a user turn."""
    if user.role is not None or reply.role is not None:
        return user.role == "user" and reply.role == "assistant"
    return reply.speaker != user.speaker


def pair_turns(turns: list[Turn]) -> list[tuple[Turn, Turn | None]]:
    """``(user turn, reply turn or None)`` pairs in order; a reply must come from the other speaker (with roles:
    an assistant turn after a user turn)."""
    pairs: list[tuple[Turn, Turn | None]] = []
    i = 0
    while i < len(turns):
        user = turns[i]
        if i + 1 < len(turns) and _replies(user, turns[i + 1]):
            pairs.append((user, turns[i + 1]))
            i += 2
        else:
            pairs.append((user, None))
            i += 1
    return pairs


class FractalArm:
    """One Fractal session per conversation; one row, ``fractal``."""

    name = "fractal"
    rows: tuple[str, ...] = ("fractal",)

    def __init__(self, ctx: ArmContext) -> None:
        self.ctx = ctx
        self.workspace = Path(ctx.workdir) / "fractal-workspace"
        self.state_dir = Path(ctx.workdir) / "fractal-state"
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.agent = ScriptedAgent()
        self.runtime: FractalRuntime | None = None
        self.snippets: dict[str, str] = {}
        self.submits = 0
        self.ingest_s = 0.0

    def ingest(self, conversation: Conversation) -> None:
        started = time.perf_counter()
        self.snippets = turn_snippets(conversation)
        runtime = FractalRuntime.create(self.workspace, self.agent, state_dir=self.state_dir)
        done = 0
        for session in conversation.sessions:
            report(done)
            done += len(session.turns)
            for k, (user, reply) in enumerate(pair_turns(session.turns)):
                message = turn_line(user)
                header = session_header(session.index, session.date_time) if k == 0 else ""
                if header:
                    message = header + "\n" + message
                response = turn_line(reply) if reply is not None else ""
                self.agent.add(TurnScript([], Return(response, [])))
                runtime.submit_sync(message)
                self.agent.calls.clear()  # the capture of ingest calls is not needed; keep memory flat
                self.submits += 1
        # answer probes from the persisted state: reload the session from its file
        runtime.resume(runtime.session.session_id)
        self.runtime = runtime
        self.ingest_s = time.perf_counter() - started

    def _probe_call(self, question: str) -> Any:
        """The agent call ``submit(question)`` would make, without saving and without keeping the turn."""
        assert self.runtime is not None, "ingest() first"
        runtime = self.runtime
        session = runtime.session
        state = session.state
        n_summary = len(state.summary.turns)
        history = list(state.history)  # at most 20 references: all that the append + trim can change
        try:
            session.add_user_message(question)
            self.agent.add(TurnScript([], Return("", [])))
            asyncio.run(self.agent.aforward(
                workspace_path=runtime.workspace_path, user_message=question,
                rendered_session_summary=session.summary(), session_history=session.session_history_payload(),
                included_paths=runtime.included_paths or None))
            return self.agent.calls.pop()
        finally:
            del state.summary.turns[n_summary:]
            state.history = history

    def deliver(self, probe: Probe) -> dict[str, Delivery]:
        started = time.perf_counter()
        call = self._probe_call(probe.question)
        text = call.model_visible_text()
        row_ms = (time.perf_counter() - started) * 1000  # the design's call; the id matching below is the harness's
        history = call.inputs_json["session_history"]
        meta = {"summary_turns": len(self.runtime.session.state.summary.turns) + 1 if self.runtime else 0,
                "history_turns": len(history), "instructions_chars": len(call.instructions),
                "submits": self.submits, "row_ms": round(row_ms, 3)}
        return {"fractal": Delivery(text=text, dia_ids=ids_in_text(text, self.snippets), meta=meta)}

    def session_file(self) -> Path:
        assert self.runtime is not None, "ingest() first"
        return self.runtime.session_file()

    def stored(self) -> frozenset[str]:
        if self.runtime is None:
            return frozenset()
        data = json.loads(self.session_file().read_text(encoding="utf-8"))
        texts: list[str] = []
        for turn in data.get("summary", {}).get("turns", []):
            texts.append(str((turn.get("user") or {}).get("message", "")))
            texts.append(str((turn.get("agent") or {}).get("response", "")))
        texts += [str(h.get("user_message", "")) for h in data.get("history", [])]
        return ids_in_text("\n".join(texts), self.snippets)

    def close(self) -> None:
        self.agent.close()
