"""Where the resident service's memory and its warm volunteer time go, one stage at a time (in-process).

    python -m benchmarks.serve_breakdown STORE.kuzu [buffer_pool_mib] [facts|decisions]

Prints the RSS after each stage the service goes through at start-up (light MiniLM load, read-only Kuzu open,
search cache build, why-block cache build), the search cache's array sizes, the in-process volunteer latency
(p50 of 12 calls, no process spawn, no socket), its parts (query encode, each search, why-blocks) and the top
functions of a profile of 6 calls. Used for the
breakdown next to ``memsim bench serve``'s results (the stores it builds are cached under
``~/.cache/memsim/bench-serve``); ``decisions`` asks the near-duplicate decision store's questions
(``benchmarks.serve.decision_questions``) instead of the fact store's.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import cProfile  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import pstats  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

QUESTIONS = ["What is the release cadence of the platform team?", "Who owns the billing service migration?",
             "Which database did the search team pick?", "When does the data team ship the new pipeline?"]


def main(db: str, buffer_pool_mib: int = 1024, questions: str = "facts") -> None:
    from tortoise_sim.service import rss_bytes

    global QUESTIONS
    if questions == "decisions":
        from benchmarks.serve import decision_questions

        QUESTIONS = decision_questions(4, 0)
    elif questions != "facts":
        raise SystemExit(f"questions must be facts or decisions, got {questions!r}")

    def mib() -> int:
        return round((rss_bytes() or 0) / 2**20)

    print("python + imports", mib())
    from tortoise_sim.light_encoder import light_encoder

    enc = light_encoder()
    enc.encode(["warm up"])
    print("light MiniLM loaded", mib())
    import scipy.special  # noqa: F401  (as the service)

    from tortoise_sim.store import TortoiseStore

    st = TortoiseStore(db, encoder=enc, seed=None, read_only=True, buffer_pool_size=buffer_pool_mib << 20)
    print("Kuzu open (read-only)", mib())
    from tortoise_sim import why
    from tortoise_sim.search import search_cache_for

    t0 = time.time()
    c = search_cache_for(st)
    print("search cache built", mib(), f"({time.time() - t0:.1f} s)")
    arrays = {k: round(v.nbytes / 2**20) for k, v in vars(c).items() if getattr(v, "nbytes", 0) > 2**20}
    print("search cache arrays MiB", arrays)
    t0 = time.time()
    why._why_cache_for(st)
    print("why cache built", mib(), f"({time.time() - t0:.1f} s)")
    c.prepare_dedup(st)  # as the service's cache refresh
    print("distinct embedding rows", "not deduplicated" if c.uniq is None else f"{c.uniq.u:,} of {c.n:,}")
    from tortoise_sim.hooks import hook_volunteer_turn

    ts = []
    for i in range(12):
        t0 = time.perf_counter()
        hook_volunteer_turn(json.dumps({"prompt": f"{QUESTIONS[i % 4]} ({i})"}), "claude", store=st)
        ts.append(time.perf_counter() - t0)
    ts.sort()
    print(f"volunteer in-process p50 {1000 * ts[6]:.1f} ms, min {1000 * ts[0]:.1f} ms; RSS {mib()}")
    from tortoise_sim.config import READ_TERMINAL
    from tortoise_sim.search import search_points
    from tortoise_sim.why import assemble_why_blocks

    parts: dict[str, list[float]] = {"query encode": [], "search (float32 pass + legs + RRF)": [],
                                     "search, same query again (pass reused)": [], "why-blocks": []}
    for i in range(12):
        q = f"{QUESTIONS[i % 4]} <{i}>"
        t0 = time.perf_counter()
        st.embed([q])
        t1 = time.perf_counter()
        hits, _ = search_points(st, q, 24, list(READ_TERMINAL), True)
        t2 = time.perf_counter()
        search_points(st, q, 24, ["retracted"], False)
        t3 = time.perf_counter()
        assemble_why_blocks(st, [h["id"] for h in hits])
        t4 = time.perf_counter()
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            parts[k].append(v)
    for k, v in parts.items():
        print(f"{k}: p50 {1000 * sorted(v)[len(v) // 2]:.1f} ms")
    print(f"search cache: {c.searches} searches, {c.exact_fallbacks} near-tie resolutions, "
          f"{getattr(c, 'exact_rows', 0)} rows recomputed, pass threads {getattr(c, 'pass_threads', 1)}")
    pr = cProfile.Profile()
    pr.enable()
    for i in range(6):
        hook_volunteer_turn(json.dumps({"prompt": f"{QUESTIONS[i % 4]} [{i}]"}), "claude", store=st)
    pr.disable()
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(10)
    print(out.getvalue())
    st.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1024, sys.argv[3] if len(sys.argv) > 3 else "facts")
