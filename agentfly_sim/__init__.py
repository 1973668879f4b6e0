"""agentfly_sim: executable reference simulator of AgentFly/Memento case-based reasoning memory.

Modules follow the reference system's mechanism boundaries (spec shared/spec/agentfly.md):
``bank`` (JSONL artefacts), ``plans`` (ICL plan text), ``embedding`` (NP selector), ``classifier`` (PM selector),
``training`` (retriever trainer), ``prompts`` (example prompts, judge prompt), ``driver`` (NP and PM loops),
``history`` (shared history, trimming, token counters), ``workspace`` (file tools, execution.log), ``agents``
(offline scripted planner/executor/judge), ``dspy_agents`` (dspy modules over an injected LM), ``errors``
(named errors, fault schedule) and ``testing`` (non-faithful test doubles).
"""

from __future__ import annotations

import logging

logging.getLogger("agentfly_sim").addHandler(logging.NullHandler())
