"""The arm protocol: one small adapter per design (and per baseline) over a conversation workload.

An arm ingests a whole conversation in order (sessions in order, each with its date-time text, turns in order)
through the design's public API (a LoCoMo conversation or one LongMemEval question, the two loaders of
``harness.workloads.locomo``'s models; see ``harness.workloads.lme_workload``), then answers each probe with a ``Delivery``: the exact text a model would get
for that question, and the provenance (which ``dia_id`` turns that text contains). ``stored()`` names the turns
whose content exists anywhere in the arm's durable memory, so the gap between stored and delivered can be read
per design. Adapters live in the harness; the simulators never learn about workloads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from harness.workloads.locomo import Conversation, Probe


@dataclass(frozen=True)
class Delivery:
    """What an arm puts in front of the model for one probe.

    ``text`` is the exact model-visible text (the whole prompt or the memory block, as the arm documents);
    ``dia_ids`` are the turns whose content that text carries; ``meta`` holds arm-specific extras (ranked ids,
    scores, the digest, recompute cost) as JSON-serialisable values.

    Two ``meta`` keys have a meaning the harness reads:

    - ``"ranked_ids"`` (or ``"ranked"``): the row's delivered ranking, best first, one turn id per ranked unit
      (``"?"`` for a unit that maps to no turn; a list of ids for a unit tagged with several turns). A row that
      carries one is a *ranked* row and gets the ranked metrics (``harness.workloads.metrics``).
    - ``"row_ms"``: the milliseconds this row spent in the design's public API, measured by the arm around the
      design call and excluding the harness's own provenance matching (finding ``dia_ids`` in ``text``). When
      every row of an arm reports it, the runner reports it as the row's design time and the rest of the deliver
      call as the harness's time.
    """

    text: str
    dia_ids: frozenset[str]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class ArmContext:
    """What every arm constructor receives.

    ``workdir`` is a fresh directory the arm owns (its bank, session files, Kuzu store); ``k_values`` the top-K
    settings for ranked arms (one delivered row per K); ``others`` the other conversations of the run (the PM arm
    trains on them, leave-one-conversation-out); ``lm`` an optional dspy LM string (e.g. Tortoise's extractor);
    ``quick`` asks for the smallest settings (tests). ``workload`` names the loader of the conversation the arm is
    built for (``"locomo"`` or ``"longmemeval"``, ``Conversation.workload``; the runner sets it), for the rows
    that exist on one workload only (Tortoise's no-expansion row on LongMemEval). ``pm_model`` is a PM
    checkpoint folder made by ``agentfly_arm.train_pm_model`` (LongMemEval: trained once per run on questions
    disjoint from the evaluated ones); the PM arm then loads it instead of training on ``others``.
    """

    workdir: Path
    k_values: tuple[int, ...] = (4, 8)
    seed: int = 0
    others: tuple[Conversation, ...] = ()
    lm: str | None = None
    quick: bool = False
    workload: str = "locomo"
    pm_model: Path | None = None


@runtime_checkable
class Arm(Protocol):
    """One design or baseline behind the same three operations.

    One ingest may serve several delivered *rows* (NP at K=4 and K=8 over one bank; Tortoise's volunteered
    block and its evaluation path over one store): ``rows`` names them and ``deliver`` returns one ``Delivery``
    per row name.
    """

    name: str
    rows: tuple[str, ...]

    def ingest(self, conversation: Conversation) -> None:
        """Feed every turn of ``conversation`` in order, through the design's public API."""

    def deliver(self, probe: Probe) -> dict[str, Delivery]:
        """Per row: the model-visible text for ``probe`` and the turns it carries; must not change what later
        probes see."""

    def stored(self) -> frozenset[str]:
        """The ``dia_id``s whose content exists anywhere in the arm's durable memory after ingest."""

    def close(self) -> None:
        """Release files, stores and processes the arm holds."""
