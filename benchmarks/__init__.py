"""memsim benchmarks: ``selectors``, ``cbr_loop``, ``cost`` (run them with ``memsim bench NAME``).

Each module's ``run(out_dir, quick=..., seed=..., track=...)`` measures side by side in one run and writes
``<name>.{json,md,png}`` (machine, date, versions, seeds included); ``metrics`` holds the in-house ranking metrics,
``rankers`` the baseline selectors, ``report`` assembles ``benchmarks/RESULTS.md`` from the committed results.
"""
