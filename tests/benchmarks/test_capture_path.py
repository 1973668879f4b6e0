"""The capture-path benchmark on a tiny store: both engines write their decision, every stage is timed, the
memory reads return the whole population, and the markdown is rendered from the JSON."""

from __future__ import annotations

from benchmarks import capture_path


def test_capture_path_on_a_tiny_store(tmp_path):
    store = tmp_path / "tiny.kuzu"
    capture_path.build_store(store, 40)
    cap = capture_path.capture_section(store, rounds=1)
    assert cap["points"] >= 40
    assert set(cap["engines"]) == set(capture_path.ENGINES)
    for e in cap["engines"].values():
        assert e["p50_ms"] > 0
        assert set(e["stages_p50_ms"]) == {s[0] for s in capture_path.STAGES}
        assert e["stages_p50_ms"]["payload writer"] > 0  # the decision was written, not consolidated away
    mem = capture_path.memory_section(store)
    assert {m["rows"] for m in mem.values()} == {40}
    result = {"store": store.name, "capture": cap, "memory": mem}
    result["levels"] = capture_path.levels(result)
    md = capture_path.render_markdown(result)
    assert f"{cap['engines']['indexed']['p50_ms']}" in md and "id ranges" in md
