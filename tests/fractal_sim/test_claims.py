"""The Fractal claims ledger: 45 claims registered, all hold on the faithful simulator, and checks can fail.

The sensitivity tests patch one faithful behaviour at a time (a larger history cap, a renderer that names files,
a saver that writes compact JSON) and show the claims that depend on it turn ``refuted``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fractal_sim.session as session_mod
import fractal_sim.store as store_mod
from harness.claims import ClaimContext, all_claims


def run(claim_id: str, tmp_path: Path, quick: bool = True):
    (c,) = all_claims(ids=[claim_id])
    return c.demonstrate(ClaimContext(tmp_path=tmp_path, quick=quick))


def test_all_45_registered_with_kinds() -> None:
    claims = all_claims(design="fractal")
    assert [c.id for c in claims] == [f"FRA-{i:02d}" for i in range(1, 46)]
    assert {c.id for c in claims if c.kind == "consequence"} == {f"FRA-{i}" for i in range(41, 46)}
    assert all(c.record and c.statement for c in claims)


@pytest.mark.parametrize("claim_id", [f"FRA-{i:02d}" for i in range(1, 46)])
def test_claim_holds(claim_id: str, tmp_path: Path) -> None:
    obs = run(claim_id, tmp_path)
    assert obs.verdict == "holds", json.dumps(obs.measured, default=str)[:2000]
    json.dumps(obs.measured)  # measured values are JSON-serialisable


def test_consequences_report_numbers(tmp_path: Path) -> None:
    assert run("FRA-41", tmp_path / "a", quick=False).measured["summary_chars"] == {"10": 4629, "50": 23109, "200": 92510}
    m44 = run("FRA-44", tmp_path / "b").measured
    assert len(m44["final_save_bytes"]) == 40 and len(m44["pending_save_bytes"]) == 40
    m42 = run("FRA-42", tmp_path / "c").measured
    assert len(m42["per_call_visible"]) == 31


def test_larger_history_cap_refutes_tail_claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_mod, "MAX_HISTORY_TURNS", 25)
    assert run("FRA-04", tmp_path / "a").verdict == "refuted"
    assert run("FRA-06", tmp_path / "b").verdict == "refuted"
    assert run("FRA-42", tmp_path / "c").verdict == "refuted"


def test_renderer_naming_files_refutes_fra01(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = session_mod.render_session_summary

    def leaky(summary):  # a hypothetical design that keeps file names in the summary
        return original(summary) + "\nfiles: a.py b.py"

    monkeypatch.setattr(session_mod, "render_session_summary", leaky)
    assert run("FRA-01", tmp_path).verdict == "refuted"


def test_compact_json_refutes_format_claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_mod, "serialize_state",
                        lambda state: json.dumps(state.model_dump(mode="json"), ensure_ascii=False) + "\n")
    assert run("FRA-40", tmp_path / "a").verdict == "refuted"
    assert run("FRA-44", tmp_path / "b").verdict == "refuted"
    assert store_mod.serialize_state is not session_mod.serialize_state
