"""Reliability tools: the crash-point explorer (``crash``), real SIGKILL runs (``kill``, ``kill_service``),
concurrent writers (``concurrent``), the crash scenarios of each design (``scenarios``) and their report
(``crash_report``), the loader fuzzer (``fuzz``) and the planted-secrets corpus (``secrets_corpus``)."""
