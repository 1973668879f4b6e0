"""Property tests (hypothesis) for truncation, trimming, splits and ICL text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentfly_sim.history import LenTokenCounter, message_cost, trim_messages
from agentfly_sim.plans import build_icl_text
from agentfly_sim.training import group_split_indices, stratified_split_indices
from agentfly_sim.workspace import truncate_text

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
                           max_leaves=10)


@given(n=st.integers(0, 20000), ext=st.sampled_from(["", ".txt", ".json", ".md", ".py", ".SH", ".csv"]))
@settings(max_examples=60, deadline=None)
def test_truncation_length_formula(n, ext):
    out = truncate_text("x" * n, 1000, f"f{ext}")
    if ext.lower() in (".py", ".sh") or n <= 4000:
        assert out == "x" * n
    else:
        assert len(out) == 4000 + 35 + len(f"{n - 4000:,}")


@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=8), max_ctx=st.integers(5, 200))
@settings(max_examples=100, deadline=None)
def test_trim_keeps_system_and_newest_suffix(lengths, max_ctx):
    c = LenTokenCounter()
    msgs = [{"role": "system" if i == 0 else "user", "content": "m" * n} for i, n in enumerate(lengths)]
    out = trim_messages(msgs, max_ctx, c)
    total = sum(message_cost(m, c) for m in msgs) + 2
    if total <= max_ctx:
        assert out == msgs
        return
    assert out[0] is msgs[0]
    kept = out[1:]
    rest = msgs[1:]
    assert kept == rest[len(rest) - len(kept):]  # a suffix of the newest messages
    used = sum(message_cost(m, c) for m in out) + 2
    assert used <= max_ctx or not kept
    if len(kept) < len(rest):  # the next older message did not fit
        assert used + message_cost(rest[len(rest) - len(kept) - 1], c) > max_ctx


@given(labels=st.lists(st.integers(0, 1), min_size=2, max_size=60), ratio=st.floats(0.05, 0.9),
       seed=st.integers(0, 1000), stratify=st.booleans())
@settings(max_examples=80, deadline=None)
def test_split_is_partition(labels, ratio, seed, stratify):
    tr, va = stratified_split_indices(labels, ratio, seed, stratify=stratify)
    assert sorted(tr + va) == list(range(len(labels)))
    if stratify and tr and len(va) > 1:
        for cls in (0, 1):
            n = sum(1 for y in labels if y == cls)
            if n:
                assert sum(1 for i in va if labels[i] == cls) == max(1, int(n * ratio))


@given(qids=st.lists(st.integers(0, 12), min_size=2, max_size=60), seed=st.integers(0, 100))
@settings(max_examples=60, deadline=None)
def test_group_split_no_leak(qids, seed):
    queries = [f"q{i}" for i in qids]
    labels = [i % 2 for i in qids]
    tr, va = group_split_indices(queries, labels, 0.2, seed)
    assert sorted(tr + va) == list(range(len(qids)))
    assert not ({queries[i] for i in tr} & {queries[i] for i in va})


@given(case=st.text(max_size=30), plan=json_values)
@settings(max_examples=150, deadline=None)
def test_build_icl_text_total(case, plan):
    out = build_icl_text(case, plan)
    assert out.startswith("[CASE]")
    assert ("[PLAN]" in out) or plan is None or "[PLAN]" in case
