"""``benchmarks.progress``: what a long run shows on stderr. In a terminal (a pseudo-terminal here) the live display
names the arm whose ingest is running and the turns it has done; without one (a pipe) plain lines come at least
every ``interval_s`` while the ingest holds, and one when each phase ends. Worker processes report through a
queue; the LongMemEval design loop shows each question's arm phases. No test measures a duration: each waits for
what it expects to see (with a generous limit) while the arm holds its ingest open."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import queue
import re
import struct
import sys
import termios
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from benchmarks.progress import (
    FunctionTracker,
    NullTracker,
    PlainTracker,
    Relay,
    RichTracker,
    StampedTracker,
    Tracker,
    progress_bar,
    worker_tracker,
)
from harness.progress import report, reporting
from harness.workloads.arms import ArmSpec
from harness.workloads.base import ArmContext, Delivery
from harness.workloads.runner import run_conversation
from tests.harness.locomo_arms_fixture import tiny_conversation

WAIT_S = 60.0
"""The longest a test waits for the display to show something (it normally takes a fraction of a second)."""
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


class SlowArm:
    """An arm whose ingest reports each turn and, after turn ``hold_at``, calls ``hold()`` (the test waits there
    until the display showed what it expects)."""

    name = "slowarm"
    rows = ("slowarm",)

    def __init__(self, ctx: ArmContext, hold: Callable[[], None] = lambda: None, hold_at: int = 3) -> None:
        self.hold, self.hold_at = hold, hold_at
        self.ids: list[str] = []

    def ingest(self, conversation: Any) -> None:
        turns = conversation.turns()
        for i, t in enumerate(turns, 1):
            self.ids.append(t.dia_id)
            report(i, status=f"reading turn {i}")
            if i == self.hold_at:
                self.hold()

    def deliver(self, probe: Any) -> dict[str, Delivery]:
        return {"slowarm": Delivery(text="", dia_ids=frozenset(), meta={})}

    def stored(self) -> frozenset[str]:
        return frozenset(self.ids)

    def close(self) -> None:
        pass


def _spec(hold: Callable[[], None]) -> ArmSpec:
    return ArmSpec("slowarm", "design", "test arm", __name__, "SlowArm", {"hold": hold})


class _Reader:
    """Collects what is written to a file descriptor, from a thread, until EOF (or EIO on a closed pty)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.chunks = fd, []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                got = os.read(self.fd, 4096)
            except OSError:
                return
            if not got:
                return
            with self.lock:
                self.chunks.append(got)

    @property
    def text(self) -> str:
        with self.lock:
            return ANSI.sub("", b"".join(self.chunks).decode("utf-8", "replace"))

    def wait_for(self, pred: Callable[[str], bool]) -> bool:
        end = time.monotonic() + WAIT_S
        while time.monotonic() < end:
            if pred(self.text):
                return True
            time.sleep(0.01)
        return pred(self.text)


def test_report_outside_a_phase_does_nothing_and_inside_reaches_the_sink() -> None:
    report(3, status="nobody listens")  # no phase: no error, nothing to see
    got: list[tuple[Any, dict[str, Any]]] = []
    with reporting(lambda done=None, **kw: got.append((done, kw))):
        report(2, total=9, status="encoding")
        report(status="")
    assert got == [(2, {"total": 9, "status": "encoding"}), (None, {"status": ""})]
    report(4)
    assert len(got) == 2


def test_pipe_gets_periodic_lines_naming_the_arm_and_turns_done(tmp_path: Path) -> None:
    r, w = os.pipe()
    reader = _Reader(r)
    stream = os.fdopen(w, "w", encoding="utf-8")
    seen: dict[str, bool] = {}

    def hold() -> None:  # two periodic lines while the ingest sits at turn 3 of 6
        seen["periodic"] = reader.wait_for(lambda t: t.count("tiny-1 slowarm ingest: 3/6 turns") >= 2)

    with progress_bar(interval_s=0.05, stream=stream) as track:
        assert isinstance(track, PlainTracker)
        res = run_conversation(tiny_conversation(), [_spec(hold)], tmp_path, k_values=(2,), track=track)
    stream.close()
    reader.thread.join(WAIT_S)
    text = reader.text
    assert res["arms"]["slowarm"]["status"] == "ok"
    assert seen["periodic"], text
    line = next(x for x in text.splitlines() if x.startswith("tiny-1 slowarm ingest: 3/6 turns"))
    assert "elapsed" in line and "reading turn 3" in text
    # one line at the end of each phase: the ingest and the probe loop
    assert re.search(r"^tiny-1 slowarm ingest: finished 6/6 turns in \d+:\d\d:\d\d$", text, re.M), text
    assert re.search(r"^tiny-1 slowarm: finished 3/3 in \d+:\d\d:\d\d$", text, re.M), text
    assert all(len(x) <= 80 for x in text.splitlines())


def test_pipe_lines_nest_an_arm_phase_under_the_loop_and_say_when_nothing_is_open() -> None:
    out = io.StringIO()
    tracker = PlainTracker(out, interval_s=60.0)  # no thread: the test calls beat() itself
    tracker.beat()
    assert re.fullmatch(r"working: 0:00:\d\d since the start\n", out.getvalue())
    for _ in tracker([1, 2], description="questions", unit="questions"):
        with tracker.phase("q1 tortoise ingest", total=400, unit="turns") as ph:
            ph.update(100, status="session 12/48")
            tracker.beat()
        with tracker.phase("q1 bm25 ingest", total=400, unit="turns"):
            pass  # over before any periodic line: no end line of its own
    lines = out.getvalue().splitlines()[1:]
    assert lines[0].startswith("questions: 0/2 questions, 0:00:")
    assert lines[1].startswith("  q1 tortoise ingest: 100/400 turns, 0:00:") and "ETA" in lines[1]
    assert lines[1].endswith("; session 12/48")
    ends = [x for x in lines if "finished" in x or "stopped" in x]
    assert [x.split(":")[0] for x in ends] == ["  q1 tortoise ingest", "  q1 tortoise ingest", "questions"]
    assert "stopped at 100/400 turns" in ends[0] and "bm25" not in out.getvalue()
    assert ends[2].startswith("questions: finished 2/2 questions in")


def test_terminal_shows_the_arm_its_status_and_turns_done(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    reader = _Reader(master)
    stream = os.fdopen(slave, "w", encoding="utf-8")
    seen: dict[str, bool] = {}

    def hold() -> None:
        seen["live"] = reader.wait_for(lambda t: "tiny-1 slowarm ingest: reading turn 3" in t and "3/6 turns" in t)

    with progress_bar(interval_s=0.05, stream=stream) as track:
        assert isinstance(track, RichTracker)
        for _ in track(["q"], description="conversations"):
            res = run_conversation(tiny_conversation(), [_spec(hold)], tmp_path, k_values=(2,), track=track)
    stream.close()
    reader.thread.join(WAIT_S)
    os.close(master)
    assert res["arms"]["slowarm"]["status"] == "ok"
    assert seen["live"], reader.text
    assert "conversations" in reader.text and "1/1" in reader.text


def test_no_progress_and_plain_functions_keep_working(tmp_path: Path) -> None:
    none = NullTracker()
    items = [1, 2]
    assert none(items, description="x") is items
    with none.phase("step", total=3) as ph:
        ph.update(2, status="half")  # counts for nobody
    bars: dict[str, list[int]] = {}

    def fn(it, description: str = "", total: int | None = None):  # type: ignore[no-untyped-def]
        seen = bars.setdefault(description, [0, total or 0])
        for x in it:
            seen[0] += 1
            yield x

    tracker = FunctionTracker(fn)
    run_conversation(tiny_conversation(), ["full"], tmp_path, k_values=(2,), track=tracker)
    # the ingest phase becomes one loop of the function over the turns
    assert bars == {"tiny-1 full ingest": [6, 6], "tiny-1 full": [3, 3]}
    stamps: list[float] = []
    stamped = StampedTracker(tracker, stamps)
    assert list(stamped([1, 2, 3], description="outer", total=3)) == [1, 2, 3] and len(stamps) == 4
    assert bars["outer"] == [3, 3]


def test_worker_phases_reach_the_parent_display_through_the_queue(tmp_path: Path) -> None:
    events: queue.Queue[Any] = queue.Queue()
    out = io.StringIO()
    parent = PlainTracker(out, interval_s=60.0)
    echoed: list[str] = []
    relay = Relay(events, parent, echoed.append)
    box: dict[str, Any] = {}

    def hold() -> None:  # the parent's display has the worker's ingest at turn 3
        end = time.monotonic() + WAIT_S
        while time.monotonic() < end and not any(p.done == 3 for p in list(parent.open_phases.values())):
            time.sleep(0.01)
        parent.beat()

    def worker() -> None:
        tracker = worker_tracker(events)
        tracker.echo("a worker line")
        box["res"] = run_conversation(tiny_conversation(), [_spec(hold)], tmp_path, k_values=(2,), track=tracker)

    for _ in parent([1], description="conversations"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    relay.close()
    text = out.getvalue()
    assert box["res"]["arms"]["slowarm"]["status"] == "ok"
    assert "  tiny-1 slowarm ingest: 3/6 turns" in text and "reading turn 3" in text, text
    assert "  tiny-1 slowarm ingest: finished 6/6 turns" in text
    assert echoed == ["a worker line"] and not parent.open_phases


def test_longmemeval_design_loop_shows_each_arm_phase_of_each_question(tmp_path: Path) -> None:
    """Before, the serial design loop ran its questions without the run's tracker: a long ingest showed nothing
    but the questions bar."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
    import lme_fixture as fx

    from benchmarks import longmemeval as bench

    data = fx.write(tmp_path / "lme.json", fx.quirky_questions())

    class Recording(Tracker):
        def __init__(self) -> None:
            super().__init__()
            self.log: list[tuple[str, bool, int | None, str]] = []

        def _ended(self, ph: Any) -> None:
            self.log.append((ph.description, ph.nested, ph.total, ph.unit))

    rec = Recording()
    bench.run(tmp_path / "out", data=data, arms="full,bm25", limit=2, track=rec)
    names = [d for d, *_ in rec.log]
    assert names[0] == "reading lme.json" and names[-1] == "LongMemEval questions"
    ingests = [x for x in rec.log if x[0].endswith(" ingest")]
    assert {x[0].split()[1] for x in ingests} == {"full", "bm25"} and len(ingests) == 4
    assert all(nested and unit == "turns" and total for _, nested, total, unit in ingests)


@pytest.mark.parametrize("interval", [0.0, -1.0])
def test_interval_must_be_positive(interval: float) -> None:
    with pytest.raises(ValueError, match="progress interval"):
        PlainTracker(io.StringIO(), interval_s=interval)


def test_scale_bench_shows_its_progress_in_the_commands_display(tmp_path: Path, monkeypatch) -> None:
    """Before, ``memsim bench longmemeval-scale`` (an hour on S) dropped the command's tracker and its parts ran
    with no display at all; run as a script it opens its own."""
    from typer.testing import CliRunner

    import benchmarks.common as common
    from benchmarks import longmemeval_scale as scale
    from harness.cli.main import app

    got: list[Any] = []
    cli_displays: list[Any] = []
    real = common.progress_bar

    @contextmanager
    def recorded(*a: Any, **kw: Any) -> Any:
        with real(*a, **kw) as tracker:
            cli_displays.append(tracker)
            yield tracker

    monkeypatch.setattr(common, "progress_bar", recorded)
    monkeypatch.setattr(scale, "run", lambda out, **kw: (got.append(kw["track"]), [])[1])
    res = CliRunner().invoke(app, ["bench", "longmemeval-scale", "--quick", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert len(cli_displays) == 1 and got[0] is cli_displays[0]  # the command's display, not a second one
    scale.main(["--quick", "--out", str(tmp_path / "o2")])
    assert isinstance(got[1], PlainTracker) and got[1] is not cli_displays[0]  # as a script: its own
